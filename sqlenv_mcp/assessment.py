"""Assessment mode: the assessor assigns each episode; the agent cannot choose or restart it.

An `Assessment` opens one episode per question it is given, each question at most once, and
hands out a `Seat` for it: the episode behind an unguessable token. Over HTTP a seat's tools
are at `/assess/<token>/mcp`; over stdio the server serves one seat. The tools are the four
the contract names, acting on the seat's episode only (they take no `episode_id`), and
`start_episode`, which takes no arguments and shows the assigned episode's opening again: it
never starts another. The episode ends with its one answer or its last step; after that every
call is refused. The engine scores every call, as in every other mode.

One server can serve the seats of several assessments (each with its own step budget): they
share a `Seats` registry.
"""

from __future__ import annotations

import logging
import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp.types import CallToolResult

from env_core import contract
from env_core.episode import Episode, refusal
from env_core.errors import (
    EpisodeFinishedError,
    InvalidArgumentError,
    SQLEnvError,
    UnknownEpisodeError,
)
from env_core.manager import EpisodeManager
from env_core.sandbox import finish_async
from env_core.tools import ToolSpec, object_schema
from serving.asgi import INVALID_REQUEST, App, Receive, Scope, Send, respond_json, rpc_error
from sqlenv_mcp.agent_tools import AgentTool, AgentToolServer, declared, engine_tool
from sqlenv_mcp.episodes import STARTING
from sqlenv_mcp.results import StartOutput, StepOutput, error_result, start_result, step_result
from sqlenv_mcp.sdk import Caller

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "This is an assessment. Call start_episode first: it shows your assigned question, the "
    "database id, the table names and the step budget. The episode cannot be chosen or "
    "restarted, and it takes one answer.\n\n" + contract.INSTRUCTIONS
)
START_DESCRIPTION = (
    "Show your assigned episode: the question, the database id, the table names and the step "
    "budget. The episode is assigned by the assessment; it cannot be chosen or restarted."
)
NOT_CHOSEN = (
    "this is an assessment: your episode is assigned and cannot be chosen or restarted; "
    "start_episode takes no arguments"
)
NO_SEAT = "no assigned episode at this address: it has ended, or the address is wrong"


@dataclass(frozen=True)
class Seat:
    """One assigned episode and the token that reaches it."""

    token: str
    episode_id: str
    question_id: str
    manager: EpisodeManager = field(repr=False, compare=False)

    def episode(self) -> Episode:
        return self.manager.get(self.episode_id, self.token)

    def ended(self) -> str:
        """Why a call after the end is refused: not the engine's advice to start a new
        episode, which an assessed agent cannot do."""
        try:
            ending = f" ({self.episode().ending})"
        except UnknownEpisodeError:  # released meanwhile
            ending = ""
        return f"your assigned episode has ended{ending}; it takes no more calls"

    def outcome(self) -> str:
        episode = self.episode()
        verdict = {True: "correct", False: "incorrect", None: "not answered"}[episode.correct]
        return (
            f"{self.question_id}: {verdict}, reward {episode.total_reward:+.3f} after "
            f"{episode.steps_used} steps"
        )


class Seats:
    """The open seats of one server, by token, whichever assessment assigned them."""

    def __init__(self) -> None:
        self._by_token: dict[str, Seat] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._by_token)

    def add(self, seat: Seat) -> None:
        with self._lock:
            self._by_token[seat.token] = seat

    def get(self, token: str | None) -> Seat | None:
        with self._lock:
            return self._by_token.get(token) if token else None

    def remove(self, seat: Seat) -> None:
        with self._lock:
            self._by_token.pop(seat.token, None)


class Assessment:
    """The episodes one assessment assigns, each question at most once."""

    def __init__(self, manager: EpisodeManager, seats: Seats) -> None:
        if manager.settings.route_by_episode_id:
            raise ValueError("an assessment needs episodes that only their seat can reach")
        self.manager = manager
        self.seats = seats
        self._assigned: set[str] = set()
        self._lock = threading.Lock()

    def assign(self, question_id: str) -> Seat:
        """Open the episode of `question_id` behind a new seat."""
        with self._lock:
            if question_id in self._assigned:
                raise InvalidArgumentError(
                    f"question {question_id} has been assigned in this assessment already; "
                    "each question is attempted once"
                )
            self._assigned.add(question_id)
        token = secrets.token_urlsafe(24)
        episode = self.manager.create(question_id=question_id, owner=token)
        seat = Seat(token, episode.episode_id, question_id, self.manager)
        self.seats.add(seat)
        return seat

    def release(self, seat: Seat) -> None:
        """Close the seat's episode; its token reaches nothing any more."""
        self.seats.remove(seat)
        self.manager.close(seat.episode_id, seat.token)


# Which seat a tool call is for: over HTTP the one its request was routed to (`SeatRouter`),
# over stdio the one seat the server serves.
SeatOf = Callable[[Caller], Seat | None]
SEAT_KEY = "sqlenv.seat"
MCP_PATH = "/mcp"
SEAT_PATH = re.compile(r"/assess/(?P<token>[A-Za-z0-9_-]+)/mcp/?")


def routed_seat(seats: Seats) -> SeatOf:
    def find(caller: Caller) -> Seat | None:
        request = caller.request
        return seats.get(request.scope.get(SEAT_KEY) if request else None)

    return find


class SeatRouter:
    """Sends `/assess/<token>/mcp` to the MCP application at `/mcp` when the token is a seat's,
    noting the token in the request's scope; answers 404 to any other MCP path (a JSON-RPC
    error, as the SDK answers an unknown session), so only a seat's holder can open a
    session. Other paths (health) pass through."""

    def __init__(self, app: App, seats: Seats) -> None:
        self.app = app
        self.seats = seats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (
            path.startswith("/assess/") or path.rstrip("/") == MCP_PATH
        ):
            await self.app(scope, receive, send)
            return
        routed = SEAT_PATH.fullmatch(path)
        if routed and self.seats.get(routed["token"]) is not None:
            inner = {**scope, "path": MCP_PATH, "raw_path": MCP_PATH.encode()}
            await self.app({**inner, SEAT_KEY: routed["token"]}, receive, send)
            return
        await respond_json(send, 404, rpc_error(None, INVALID_REQUEST, NO_SEAT))


def register_assessment_tools(
    server: AgentToolServer,
    tools: tuple[ToolSpec, ...],
    seat_of: SeatOf,
    output_schemas: bool = True,
) -> None:
    """start_episode (no arguments) and the tools on the calling seat's episode."""

    async def start(caller: Caller, arguments: dict[str, Any]) -> CallToolResult:
        seat = seat_of(caller)
        try:
            if arguments:
                raise InvalidArgumentError(NOT_CHOSEN)
            if seat is None:
                raise UnknownEpisodeError(NO_SEAT)
            return start_result(seat.episode().start)
        except SQLEnvError as error:
            return error_result(error)

    def calls_of(tool: str):
        async def call(caller: Caller, arguments: dict[str, Any]) -> CallToolResult:
            seat = seat_of(caller)
            if seat is None:
                return step_result("", refusal(tool, UnknownEpisodeError(NO_SEAT)))
            work = seat.manager.work(seat.episode_id, tool, arguments, owner=seat.token)
            result = await finish_async(work)
            if result.refused and result.data["error"] == "episode_finished":
                result = refusal(tool, EpisodeFinishedError(seat.ended()))
            if result.done and not result.refused:
                log.info("%s", seat.outcome())
            return step_result(seat.episode_id, result)

        return call

    starting = declared(
        "start_episode", START_DESCRIPTION, object_schema({}), STARTING, StartOutput
    )
    server.serve_tools(
        [
            AgentTool(starting, start),
            *(engine_tool(spec, {}, StepOutput, calls_of(spec.name)) for spec in tools),
        ],
        output_schemas,
    )
