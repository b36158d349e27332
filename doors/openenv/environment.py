"""The OpenEnv environment: each OpenEnv session holds one engine episode at a time.

The tools are answered by the engine directly rather than through an in-process MCP server:
the list and the schemas come from `env_core.tools.TOOLS` as the MCP door's do, a step costs no
MCP round trip, and OpenEnv's `/mcp` JSON-RPC route then goes through `step` too, so its calls
are rewarded and counted like WebSocket steps.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    ToolError,
    ToolErrorType,
)
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation

from doors.openenv.guard import CONNECTION_CLIENT
from doors.openenv.models import (
    EpisodeObservation,
    SQLState,
    tool_call_result,
    tool_list,
)
from doors.openenv.web import observation_html
from env_core import contract
from env_core.episode import ToolResult
from env_core.errors import InvalidArgumentError, SQLEnvError, error_data, listed
from env_core.holder import EpisodeHolder
from env_core.manager import SELECTORS, EpisodeManager
from env_core.render import error_text
from env_core.sandbox import Work, finish, finish_async

RESET_OPTIONS = ("episode_id", *SELECTORS)
CLOSED_MESSAGE = (
    "this session is closed (it was idle longer than the server's session timeout, or the "
    "server is shutting down); connect again and reset"
)
NO_EPISODE = "no episode is running: call reset first"


class SQLExploreEnvironment(Environment[Action, Observation, SQLState]):
    SUPPORTS_CONCURRENT_SESSIONS = True
    # Only construction and close run on a session's executor (resets and steps go to a shared
    # worker pool below), so one executor thread can serve every session instead of one each.
    REQUIRES_SINGLE_THREAD_EXECUTOR = True

    def __init__(self, manager: EpisodeManager) -> None:
        super().__init__()
        self._manager = manager
        # The session's episodes are its own: an episode id it chooses is scoped to it.
        self._held = EpisodeHolder(manager, idle=NO_EPISODE)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **options: Any
    ) -> EpisodeObservation:
        """Start an episode; the question is chosen exactly as `EpisodeManager.create` does.
        Options that name no question or a bad episode id are an error and leave the running
        episode as it is; the episode is held for the connection's client (see
        `guard.CONNECTION_CLIENT`)."""
        try:
            unknown = options.keys() - set(SELECTORS)
            if unknown:
                raise InvalidArgumentError(
                    f"reset does not take {listed(unknown)}; it takes: {', '.join(RESET_OPTIONS)}"
                )
            self._held.client = CONNECTION_CLIENT.get()
            episode = self._held.start(seed=seed, episode_id=episode_id, **options)
        except SQLEnvError as error:
            return error_observation(error)
        return EpisodeObservation(**episode.start.to_dict())

    def step(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> ListToolsObservation | CallToolObservation:
        return finish(self._step(action))

    # The server awaits these on its event loop. A reset and the in-process tools are bounded
    # by construction; SQL waits for its sandbox worker on the loop, so no call takes a thread.
    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **options: Any
    ) -> EpisodeObservation:
        return self.reset(seed=seed, episode_id=episode_id, **options)

    async def step_async(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> ListToolsObservation | CallToolObservation:
        return await finish_async(self._step(action))

    def _step(self, action: Action) -> Work[ListToolsObservation | CallToolObservation]:
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=tool_list(self._manager.tools))
        if not isinstance(action, CallToolAction):
            raise TypeError(f"expected ListToolsAction or CallToolAction, got {type(action)}")
        name = action.tool_name
        episode = self._held.episode
        if episode is None:
            return _observation("", self._held.refused(name), {})
        result = yield from self._held.work(name, action.arguments, episode.episode_id)
        metadata = {"budget_left": episode.budget_left, "total_reward": episode.total_reward}
        return _observation(episode.episode_id, result, metadata)

    @property
    def state(self) -> SQLState:
        episode = self._held.episode
        if episode is None:
            return SQLState()
        return SQLState(
            episode_id=episode.episode_id,
            step_count=episode.steps_used,
            budget_left=episode.budget_left,
            db_id=episode.question.db_id,
            question=episode.question.text,
            done=episode.done,
            total_reward=episode.total_reward,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="sqlenv", description=contract.INSTRUCTIONS, version=version("sqlenv-mcp")
        )

    def render_web(self, observation: dict[str, Any]) -> str | None:
        return observation_html(observation)

    def close(self) -> None:
        self._held.close(CLOSED_MESSAGE)


def error_observation(error: SQLEnvError) -> EpisodeObservation:
    """A reset the engine refused, as OpenEnv sends it: the engine's text and structured error."""
    return EpisodeObservation(text=error_text(error), error=error_data(error), done=True)


def _observation(episode_id: str, result: ToolResult, metadata: dict) -> CallToolObservation:
    """A tool's result as OpenEnv sends it; a call the episode did not take also carries
    OpenEnv's `error`, for generic clients."""
    error = None
    if result.refused:
        unknown = result.data["error"] == "unknown_tool"
        error_type = ToolErrorType.TOOL_NOT_FOUND if unknown else ToolErrorType.EXECUTION_ERROR
        error = ToolError(error_type=error_type, message=result.data["message"])
    return CallToolObservation(
        tool_name=result.tool,
        result=tool_call_result(episode_id, result),
        error=error,
        reward=result.reward,
        done=result.done,
        metadata=metadata,
    )
