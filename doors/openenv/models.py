"""Wire models of the OpenEnv door, shared by the server and the typed client.

Steps use OpenEnv's own MCP types (`ListToolsAction`/`CallToolAction` in,
`ListToolsObservation`/`CallToolObservation` out), so generic OpenEnv MCP clients work. A tool's
`result` has the shape of an MCP `CallToolResult` as fastmcp serialises it: the engine's text in
`content`, and in `structured_content` the same structured form the MCP door returns.
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.mcp_types import Tool
from openenv.core.env_server.types import Observation, State
from pydantic import Field

from env_core.episode import ToolResult
from env_core.tools import TOOLS_BY_NAME, ToolSpec


class EpisodeObservation(Observation):
    """What `reset` returns: the question, the database id, the table names and the budget.

    When no episode could start (unknown question id, all slots taken...), `error` says why,
    `text` repeats it and `done` is true.
    """

    text: str = Field(description="The episode's opening, as shown to a language model.")
    episode_id: str | None = None
    question: str | None = None
    db_id: str | None = None
    tables: list[str] = Field(default_factory=list)
    budget: int = Field(default=0, description="Steps the episode allows.")
    error: dict[str, str] | None = Field(
        default=None, description='{"error": kind, "message": sentence} when reset failed.'
    )


class SQLState(State):
    """The running episode, as far as the agent may know it: never the gold answer, nor the
    question's id (a key into the public gold)."""

    budget_left: int = 0
    db_id: str | None = None
    question: str | None = None
    done: bool = False
    total_reward: float = 0.0


def tool_list(specs: tuple[ToolSpec, ...]) -> list[Tool]:
    """The four tools as the engine defines them under a manager's limits (`manager.tools`),
    as the MCP door lists them."""
    return [
        Tool(name=spec.name, description=spec.description, input_schema=spec.parameters)
        for spec in specs
    ]


def tool_call_result(episode_id: str, result: ToolResult) -> dict[str, Any]:
    """A tool's result in the MCP `CallToolResult` shape; a failed call has `is_error` set."""
    return {
        "content": [{"type": "text", "text": result.text}],
        "structured_content": result.structured(episode_id),
        "is_error": not result.ok,
    }


def tool_arguments(tool: str, argument: str, n: int | None = None) -> dict[str, Any]:
    """The arguments of a one-argument call: `argument` fills the tool's required parameter
    (describe/sample: table, query: sql, answer: value); `n` is sample's optional row count."""
    spec = TOOLS_BY_NAME.get(tool)
    if spec is None:
        raise ValueError(f"unknown tool {tool!r}; tools are: {', '.join(TOOLS_BY_NAME)}")
    (required,) = spec.parameters["required"]
    arguments: dict[str, Any] = {required: argument}
    if n is not None:
        arguments["n"] = n
    return arguments


def observation_text(observation: dict[str, Any]) -> str:
    """The text a language model would read for a serialised observation of this door."""
    if "text" in observation:
        return observation["text"]
    result = observation.get("result")
    if result:
        return "\n".join(part.get("text", "") for part in result.get("content", []))
    error = observation.get("error")
    if error:
        return f"Error: {error['message']}"
    tools = observation.get("tools")
    if tools is not None:
        return "\n".join(f"{tool['name']}: {tool['description']}" for tool in tools)
    return ""
