"""The typed OpenEnv client: `SQLEnvClient` over the server's WebSocket `/ws`.

    async with SQLEnvClient(base_url="http://127.0.0.1:8000") as env:
        start = await env.reset(seed=7)
        print(start.observation.text)
        result = await env.query("SELECT count(*) FROM singer")
        print(result.observation.text, result.reward, result.done)

    with SQLEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
        env.reset(question_id="dev:12")
        env.step(SQLAction(action_type="DESCRIBE", argument="singer"))

Each client is one server session, holding one episode at a time. If the connection drops, the
client reconnects on the next call to a new session, and the episode is lost.

A call the server fails (it closes the connection, answers no message within
`message_timeout_s`, sends a frame over `max_message_size_mb` or one that is no OpenEnv message,
or answers with an error frame) raises `ServerError`, one sentence naming the server's URL.
"""

from __future__ import annotations

import inspect
from typing import Any, Literal, NoReturn

from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction, Tool
from openenv.core.env_server.types import Observation
from pydantic import BaseModel, Field
from websockets.exceptions import ConnectionClosed

from doors.openenv.models import SQLState, observation_text, tool_arguments
from env_core.tools import TOOLS, ToolSpec, python_parameters
from serving.server_reads import ServerError

# Our server's largest message is an observation within the result budget: tens of kilobytes.
MAX_FRAME_MB = 16


class SQLAction(BaseModel):
    """The classic one-argument form, converted to a `CallToolAction` before it is sent."""

    action_type: Literal["DESCRIBE", "SAMPLE", "QUERY", "ANSWER"]
    argument: str = Field(description="describe/sample: a table; query: SQL; answer: the value.")

    def to_call(self) -> CallToolAction:
        tool = self.action_type.lower()
        return CallToolAction(tool_name=tool, arguments=tool_arguments(tool, self.argument))


class SQLObservation(Observation):
    """One observation: `text` as a language model reads it, `data` as a program does.

    After reset, `data` holds the question, database id, table names and budget; after a tool
    call, the tool's structured result (`ok` false for a mistake the agent can correct).
    `error` is set when the call could not be made at all (no episode, episode over, unknown
    tool), with no step spent.
    """

    text: str
    tool: str | None = None
    ok: bool = True
    data: dict[str, Any] = Field(default_factory=dict)
    episode_id: str | None = None
    error: str | None = None


Action = CallToolAction | ListToolsAction | SQLAction


class SQLEnvClient(EnvClient[Action, SQLObservation, SQLState]):
    def __init__(self, *args: Any, max_message_size_mb: float = MAX_FRAME_MB, **kwargs: Any):
        super().__init__(*args, max_message_size_mb=max_message_size_mb, **kwargs)

    async def call(self, tool: str, **arguments: Any) -> StepResult[SQLObservation]:
        return await self._step_async(CallToolAction(tool_name=tool, arguments=arguments))

    async def list_tools(self) -> list[Tool]:
        """The tools with their schemas (costs no step)."""
        payload = await self._send_and_receive({"type": "step", "data": {"type": "list_tools"}})
        try:
            return [Tool.model_validate(tool) for tool in payload["data"]["observation"]["tools"]]
        except (LookupError, TypeError, ValueError) as error:
            self._failed(f"answered list_tools with no tool list ({error!r:.100})")

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await super()._send_and_receive(message)
        except ConnectionClosed as error:
            self._failed(f"closed the connection ({error})")
        except TimeoutError:
            self._failed(f"sent no answer within {self._message_timeout:g} s")
        except (ValueError, RecursionError):  # the frame's JSON
            self._failed("answered with a frame that is not JSON")
        except AttributeError:  # EnvClient's reading of JSON that is no object
            self._failed("answered with a frame that is no OpenEnv message")
        except RuntimeError as error:  # EnvClient's reading of an error frame
            self._failed(f"answered with an error ({str(error)[:300]})")
        except ConnectionError as error:  # EnvClient's failure to reconnect
            self._failed(f"could not be reached ({error})")
        if not isinstance(response.get("data", {}), dict):
            self._failed("answered with a frame that is no OpenEnv message")
        return response

    def _failed(self, what: str) -> NoReturn:
        raise ServerError(f"the OpenEnv server at {self.base_url} {what}") from None

    def _step_payload(self, action: Action) -> dict[str, Any]:
        if isinstance(action, SQLAction):
            action = action.to_call()
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[SQLObservation]:
        try:
            return self._result_of(payload)
        except (LookupError, TypeError, ValueError, AttributeError) as error:
            self._failed(f"answered with no step result ({error!r:.100})")

    def _result_of(self, payload: dict[str, Any]) -> StepResult[SQLObservation]:
        fields = payload.get("observation", {})
        reward, done = payload.get("reward"), payload.get("done", False)
        error = fields.get("error")
        common = {
            "text": observation_text(fields),
            "reward": reward,
            "done": done,
            "metadata": fields.get("metadata", {}),
            "error": error["message"] if error else None,
        }
        if "tool_name" in fields:
            structured = (fields.get("result") or {}).get("structured_content") or {}
            observation = SQLObservation(
                **common,
                tool=fields["tool_name"],
                ok=error is None and structured.get("ok", False),
                data=structured.get("data", {}),
                episode_id=structured.get("episode_id"),
            )
        else:
            start = {key: fields.get(key) for key in ("question", "db_id", "tables", "budget")}
            observation = SQLObservation(
                **common,
                ok=error is None,
                data=start if error is None else error,
                episode_id=fields.get("episode_id"),
            )
        return StepResult(observation=observation, reward=reward, done=done)

    def _parse_state(self, payload: dict[str, Any]) -> SQLState:
        try:
            return SQLState.model_validate(payload)
        except ValueError as error:  # pydantic's ValidationError
            self._failed(f"answered with no state ({str(error)[:100]})")


def _tool_method(spec: ToolSpec) -> Any:
    """The client's method for one tool (`env.sample("books", 3)`): its parameters are the
    tool's, each default sent as given."""
    receiver = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    signature = inspect.Signature([receiver, *python_parameters(spec)])

    async def method(self: SQLEnvClient, *values: Any, **arguments: Any) -> StepResult:
        bound = signature.bind(self, *values, **arguments)
        bound.apply_defaults()
        return await self.call(spec.name, **dict(list(bound.arguments.items())[1:]))

    method.__name__ = method.__qualname__ = spec.name
    method.__doc__ = spec.description
    method.__signature__ = signature
    return method


for _spec in TOOLS:
    setattr(SQLEnvClient, _spec.name, _tool_method(_spec))
