"""Episode mode: the four tools plus start_episode/end_episode, one episode per connection.

Each MCP connection (a stdio process, an HTTP session, an in-memory client) holds its own
episodes, closed when the connection ends (see `Connections`). A connection's new episode ends
its previous one, unless the client asks to keep several (at most `MAX_EPISODES_PER_CONNECTION`);
every tool also takes an optional `episode_id` to act on one of them. Episodes are capped per
client (remote address) by the episode manager, and an episode answers only the connection that
started it.
"""

import uuid
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import CallToolResult, ToolAnnotations

from env_core import contract
from env_core.episode import Episode, refusal
from env_core.errors import CapacityError, SQLEnvError, UnknownEpisodeError
from env_core.manager import EpisodeManager
from env_core.sandbox import finish_async
from env_core.tools import check_names, object_schema
from sqlenv_mcp.agent_tools import AgentTool, AgentToolServer, Handler, declared, engine_tool, take
from sqlenv_mcp.results import (
    EndOutput,
    StartOutput,
    StepOutput,
    error_result,
    start_result,
    step_result,
    tool_result,
)

MAX_EPISODES_PER_CONNECTION = 8

INSTRUCTIONS = (
    "Call start_episode first: it gives the question, the database id, the table names and the "
    "step budget (end_episode gives an episode up).\n\n" + contract.INSTRUCTIONS
)

STARTING = ToolAnnotations(readOnlyHint=False, idempotentHint=False, openWorldHint=False)
ENDING = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False
)
# Optional parameters are declared by their type alone, not type-or-null: a host that converts
# typed arguments (the MCP Inspector's --tool-arg seed=3) then sends a number; omitting one is
# how a host says "none".
EPISODE_ID = {
    "episode_id": {
        "type": "string",
        "description": "Episode to act on; omit to use this connection's current episode.",
    }
}


@dataclass
class ConnectionEpisodes:
    """The episodes one MCP connection opened; the newest is its current episode."""

    manager: EpisodeManager
    current: str | None = None
    opened: list[str] = field(default_factory=list)
    owner: str = field(default_factory=lambda: uuid.uuid4().hex)
    client: str | None = None  # the remote address, over HTTP
    session_id: str | None = None  # the MCP session id, over HTTP

    def resolve(self, episode_id: str | None) -> str:
        if episode_id:
            return episode_id
        if self.current is None:
            raise UnknownEpisodeError(
                "no episode is running on this connection: call start_episode first "
                "(or pass the episode_id of an episode you started)"
            )
        return self.current

    def start(self, keep_previous: bool, **selectors: Any) -> Episode:
        """Open an episode; unless `keep_previous`, the connection's other episodes end."""
        question = self.manager.choose_question(**selectors)
        leaving = self._finished() if keep_previous else list(self.opened)
        if len(self.opened) - len(leaving) >= MAX_EPISODES_PER_CONNECTION:
            raise CapacityError(
                f"this connection has {MAX_EPISODES_PER_CONNECTION} episodes open, as many as "
                "one connection may keep; end one (end_episode) or start without keep_previous"
            )
        # Opened before the others end, so a start that fails (its database cannot be opened)
        # ends nothing.
        episode = self.manager.create(
            question_id=question.id,
            owner=self.owner,
            client=self.client,
            replacing=self._episodes(leaving),
        )
        self._close(leaving)
        self.opened.append(episode.episode_id)
        self.current = episode.episode_id
        return episode

    def end(self, episode_id: str) -> bool:
        if episode_id == self.current:
            self.current = None
        if episode_id in self.opened:
            self.opened.remove(episode_id)
        return self.manager.close(episode_id, self.owner)

    def close_all(self) -> None:
        self._close(self.opened)

    def _finished(self) -> list[str]:
        """The episodes that can take no more calls (answered, or out of steps)."""
        return [episode_id for episode_id in self.opened if not self._is_open(episode_id)]

    def _is_open(self, episode_id: str) -> bool:
        try:
            return not self.manager.get(episode_id, self.owner).done
        except UnknownEpisodeError:
            return False

    def _episodes(self, episode_ids: list[str]) -> list[Episode]:
        """The episodes still open among `episode_ids`."""
        found = []
        for episode_id in episode_ids:
            with suppress(UnknownEpisodeError):
                found.append(self.manager.get(episode_id, self.owner))
        return found

    def _close(self, episode_ids: list[str]) -> None:
        for episode_id in list(episode_ids):
            self.end(episode_id)


class Connections:
    """The open connections of one server, each found by its MCP session (over HTTP, also by
    its session id).

    A connection's episodes belong to its MCP session. They close when the session ends: with
    the server lifespan, which the mcp 1.x SDK enters once per connection, else when the
    session object is released; the episodes' idle TTL bounds both.
    """

    def __init__(self, manager: EpisodeManager) -> None:
        self.manager = manager
        self._by_session: weakref.WeakKeyDictionary[Any, ConnectionEpisodes] = (
            weakref.WeakKeyDictionary()
        )
        self._by_session_id: dict[str, ConnectionEpisodes] = {}

    def of(self, ctx: Context) -> ConnectionEpisodes:
        """The calling connection's episodes."""
        episodes = self._by_session.get(ctx.session)
        if episodes is None:
            episodes = self._open(ctx)
        return episodes

    def _open(self, ctx: Context) -> ConnectionEpisodes:
        episodes = ConnectionEpisodes(self.manager)
        request = ctx.request_context.request
        if request is not None:
            episodes.client = request.client.host if request.client else None
            episodes.session_id = request.headers.get("mcp-session-id")
        if episodes.session_id is not None:
            self._by_session_id[episodes.session_id] = episodes
        self._by_session[ctx.session] = episodes
        weakref.finalize(ctx.session, self._close, episodes)
        lifetime = ctx.request_context.lifespan_context
        if isinstance(lifetime, list):  # this connection's own lifespan (mcp 1.x)
            lifetime.append(episodes)
        return episodes

    def _close(self, episodes: ConnectionEpisodes) -> None:
        episodes.close_all()
        if episodes.session_id is not None:
            self._by_session_id.pop(episodes.session_id, None)

    def holds_episode(self, session_id: str) -> bool:
        episodes = self._by_session_id.get(session_id)
        return episodes is not None and bool(episodes.opened)

    def lifespan(self):
        @asynccontextmanager
        async def connection(_server: FastMCP) -> AsyncIterator[list[ConnectionEpisodes]]:
            opened: list[ConnectionEpisodes] = []
            try:
                yield opened
            finally:
                for episodes in opened:  # synchronous: the exit may run in a cancelled scope
                    self._close(episodes)

        return connection


START_DESCRIPTION = (
    "Start a new episode: returns the question, the database id, the table names and the step "
    "budget. Optionally pick the question by id, database or split, or seed the random choice. "
    "The connection's previous episode ends, unless keep_previous is set (at most "
    f"{MAX_EPISODES_PER_CONNECTION} open at once)."
)
END_DESCRIPTION = (
    "End an episode early and free it (episodes also end when the connection closes). Omit "
    "episode_id to end this connection's current episode."
)
START_PARAMETERS = object_schema(
    {
        "question_id": {"type": "string", "description": "A question id such as dev:12."},
        "db_id": {"type": "string", "description": "Draw from this database only."},
        "split": {"type": "string", "description": "Draw from this split."},
        "seed": {"type": "integer", "minimum": 0, "description": "Seed for the random choice."},
        "keep_previous": {
            "type": "boolean",
            "default": False,
            "description": "Keep this connection's earlier episodes open, to act on them by "
            "episode_id.",
        },
    }
)


def register_episode_tools(
    server: AgentToolServer, connections: Connections, output_schemas: bool = True
) -> None:
    """start_episode, the tools in the contract's order under the manager's limits, and
    end_episode, each called with the arguments as sent (see `sqlenv_mcp.agent_tools`)."""
    manager = connections.manager

    async def start(ctx: Context, arguments: dict[str, Any]) -> CallToolResult:
        try:
            check_names("start_episode", arguments, START_PARAMETERS["properties"])
            keep_previous = take(arguments, "keep_previous", bool) or False
            episode = connections.of(ctx).start(keep_previous, **arguments)
        except SQLEnvError as error:
            return error_result(error)
        return start_result(episode.start)

    def calls_of(tool: str) -> Handler:
        async def call(ctx: Context, arguments: dict[str, Any]) -> CallToolResult:
            episodes = connections.of(ctx)
            try:
                resolved = episodes.resolve(take(arguments, "episode_id", str, UnknownEpisodeError))
            except UnknownEpisodeError as error:
                return step_result("", refusal(tool, error))
            result = await finish_async(manager.work(resolved, tool, arguments, episodes.owner))
            return step_result(resolved, result)

        return call

    async def end(ctx: Context, arguments: dict[str, Any]) -> CallToolResult:
        episodes = connections.of(ctx)
        try:
            check_names("end_episode", arguments, EPISODE_ID)
            resolved = episodes.resolve(take(arguments, "episode_id", str, UnknownEpisodeError))
        except SQLEnvError as error:
            return error_result(error)
        closed = episodes.end(resolved)
        text = f"Episode {resolved} {'ended' if closed else 'was not open'}."
        return tool_result(text, {"episode_id": resolved, "closed": closed})

    starting = declared("start_episode", START_DESCRIPTION, START_PARAMETERS, STARTING, StartOutput)
    ending = declared("end_episode", END_DESCRIPTION, object_schema(EPISODE_ID), ENDING, EndOutput)
    server.serve_tools(
        [
            AgentTool(starting, start),
            *(
                engine_tool(spec, EPISODE_ID, StepOutput, calls_of(spec.name))
                for spec in manager.tools
            ),
            AgentTool(ending, end),
        ],
        output_schemas,
    )
