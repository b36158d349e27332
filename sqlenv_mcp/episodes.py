"""Episode mode: the tools plus start_episode/end_episode, one episode per MCP session.

Each MCP session (a stdio process, an HTTP session, an in-memory client) holds its own
episodes, closed when the session ends (see `Sessions`). A session's new episode ends its
previous one, unless the client asks to keep several (at most `MAX_EPISODES_PER_SESSION`).
An episode's `episode_id` is its handle (`sqlenv_mcp.handles`): every tool takes it, and any
request that presents it acts on the episode, from any session or from none (a request with
no session has no current episode; its episodes live until ended, answered or expired).
Episodes are capped per client (remote address) by the episode manager.
"""

import functools
import weakref
from typing import Any

from mcp.types import CallToolResult, ToolAnnotations

from env_core import contract
from env_core.episode import Episode, refusal
from env_core.errors import SQLEnvError, UnknownEpisodeError
from env_core.holder import EpisodeHolder, close_dropped
from env_core.manager import EpisodeManager
from env_core.sandbox import finish_async
from env_core.tools import check_names, object_schema
from sqlenv_mcp.agent_tools import AgentTool, AgentToolServer, Handler, declared, engine_tool, take
from sqlenv_mcp.handles import Handles
from sqlenv_mcp.results import (
    EndOutput,
    StartOutput,
    StepOutput,
    error_result,
    start_result,
    step_result,
    tool_result,
)
from sqlenv_mcp.sdk import Caller

MAX_EPISODES_PER_SESSION = 8

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
        "description": "Episode to act on; omit to use this session's current episode.",
    }
}


NO_EPISODE = (
    "no episode is running in this session: call start_episode first "
    "(or pass the episode_id of an episode you started)"
)
TOO_MANY_KEPT = (
    f"this session has {MAX_EPISODES_PER_SESSION} episodes open, as many as one "
    "session may keep; end one (end_episode) or start without keep_previous"
)
SESSION_CLOSED = "this session is closed; connect again and call start_episode"
NO_SESSION = (
    "this request has no MCP session, so no current episode: pass the episode_id start_episode gave"
)


class Sessions:
    """The episodes of one server's open MCP sessions, each held for its session (over HTTP,
    also found by its session id), and the handles that name them.

    A session's episodes close when the session ends (see `Caller.when_closed`), or else when
    its connection object is released; the episodes' idle TTL bounds both. An episode started
    by a request with no session is held by none.
    """

    def __init__(self, manager: EpisodeManager, handles: Handles | None = None) -> None:
        self.manager = manager
        self.handles = handles or Handles()
        self._by_session: weakref.WeakKeyDictionary[Any, EpisodeHolder] = (
            weakref.WeakKeyDictionary()
        )
        self._by_session_id: dict[str, EpisodeHolder] = {}

    def of(self, caller: Caller) -> EpisodeHolder | None:
        """The calling session's episodes; None for a request with no session (the sessionless
        protocol's, or any request to a --stateless server)."""
        if caller.connection is None:
            return None
        held = self._by_session.get(caller.connection)
        if held is None:
            held = self._open(caller)
        return held

    def start(self, caller: Caller, keep_previous: bool, **selectors: Any) -> Episode:
        """Start an episode named by a new handle, held by the calling session if any."""
        handle = self.handles.issue()
        held = self.of(caller)
        if held is None:
            close_dropped()
            return self.manager.create(episode_id=handle, client=_client(caller), **selectors)
        return held.start(keep_previous, episode_id=handle, **selectors)

    def episode(self, caller: Caller, given: str | None) -> str:
        """The handle of the episode a request acts on: `given`, else its session's current
        episode's. Raises `UnknownEpisodeError` saying why there is none: a handle this server
        did not issue (`Handles.verify`), one whose episode is over, no session."""
        if not given:
            held = self.of(caller)
            if held is None:
                raise UnknownEpisodeError(NO_SESSION)
            return held.resolve()
        self.handles.verify(given)
        try:
            self.manager.get(given)
        except UnknownEpisodeError:
            raise UnknownEpisodeError(
                f"no open episode '{given}': it has ended (ended, or replaced by a newer start "
                f"in its session) or expired after {self.manager.settings.idle_ttl_s:g} s idle; "
                "start a new episode"
            ) from None
        return given

    def end(self, caller: Caller, handle: str) -> bool:
        """End an episode; False if it was not open. Raises `UnknownEpisodeError` for a
        handle this server did not issue (`Handles.verify`)."""
        self.handles.verify(handle)
        held = self.of(caller)
        return held.end(handle) if held is not None else self.manager.close(handle)

    def _open(self, caller: Caller) -> EpisodeHolder:
        request = caller.request
        # Not owned: its episodes answer whoever presents their handle.
        held = EpisodeHolder(
            self.manager,
            idle=NO_EPISODE,
            owned=False,
            client=_client(caller),
            keeps=MAX_EPISODES_PER_SESSION,
            full=TOO_MANY_KEPT,
        )
        session_id = request.headers.get("mcp-session-id") if request is not None else None
        if session_id is not None:
            self._by_session_id[session_id] = held
        self._by_session[caller.connection] = held
        weakref.finalize(caller.connection, self._close, held, session_id)
        if caller.when_closed is not None:
            caller.when_closed(functools.partial(self._close, held, session_id))
        return held

    def _close(self, held: EpisodeHolder, session_id: str | None) -> None:
        held.close(SESSION_CLOSED)
        if session_id is not None:
            self._by_session_id.pop(session_id, None)

    def holds_episode(self, session_id: str) -> bool:
        held = self._by_session_id.get(session_id)
        return held is not None and held.holding


def _client(caller: Caller) -> str | None:
    """The remote address whose episodes are capped together (None over stdio)."""
    request = caller.request
    return request.client.host if request is not None and request.client else None


START_DESCRIPTION = (
    "Start a new episode: returns the question, the database id, the table names and the step "
    "budget. Optionally pick the question by id, database or split, or seed the random choice. "
    "The session's previous episode ends, unless keep_previous is set (at most "
    f"{MAX_EPISODES_PER_SESSION} open at once)."
)
END_DESCRIPTION = (
    "End an episode early and free it (episodes also end when the session closes). Omit "
    "episode_id to end this session's current episode."
)
START_PARAMETERS = object_schema(
    {
        "question_id": {"type": "string", "description": "A question id such as dev:12."},
        "db_id": {"type": "string", "description": "Draw from this database only."},
        "split": {"type": "string", "description": "Draw from this split."},
        "dataset": {
            "type": "string",
            "description": "Draw from this dataset, where several are served.",
        },
        "seed": {"type": "integer", "minimum": 0, "description": "Seed for the random choice."},
        "keep_previous": {
            "type": "boolean",
            "default": False,
            "description": "Keep this session's earlier episodes open, to act on them by "
            "episode_id.",
        },
    }
)


def register_episode_tools(
    server: AgentToolServer, sessions: Sessions, output_schemas: bool = True
) -> None:
    """start_episode, the tools in the contract's order under the manager's limits, and
    end_episode, each called with the arguments as sent (see `sqlenv_mcp.agent_tools`)."""
    manager = sessions.manager

    async def start(caller: Caller, arguments: dict[str, Any]) -> CallToolResult:
        try:
            check_names("start_episode", arguments, START_PARAMETERS["properties"])
            keep_previous = take(arguments, "keep_previous", bool) or False
            episode = sessions.start(caller, keep_previous, **arguments)
        except SQLEnvError as error:
            return error_result(error)
        return start_result(episode.start)

    def calls_of(tool: str) -> Handler:
        async def call(caller: Caller, arguments: dict[str, Any]) -> CallToolResult:
            try:
                handle = sessions.episode(
                    caller, take(arguments, "episode_id", str, UnknownEpisodeError)
                )
            except UnknownEpisodeError as error:
                return step_result("", refusal(tool, error))
            result = await finish_async(manager.work(handle, tool, arguments))
            return step_result(handle, result)

        return call

    async def end(caller: Caller, arguments: dict[str, Any]) -> CallToolResult:
        try:
            check_names("end_episode", arguments, EPISODE_ID)
            given = take(arguments, "episode_id", str, UnknownEpisodeError)
            resolved = given or sessions.episode(caller, None)
            closed = sessions.end(caller, resolved)
        except SQLEnvError as error:
            return error_result(error)
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
