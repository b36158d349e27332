"""Structured tool outputs and their conversion to MCP results.

Tools return `CallToolResult` annotated with one of these models: the engine's text goes into
`content` unchanged (the same text every door shows) and the structured form into
`structuredContent`, validated against the model's small, flat schema.
"""

from __future__ import annotations

from typing import Any

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from env_core.episode import EpisodeStart, ToolResult
from env_core.errors import SQLEnvError, ends_episode, error_kind
from env_core.render import error_text


class StepOutput(BaseModel):
    episode_id: str
    tool: str
    ok: bool
    reward: float
    done: bool
    data: dict[str, Any]


class StartOutput(BaseModel):
    episode_id: str
    question: str
    db_id: str
    tables: list[str]
    budget: int


class EndOutput(BaseModel):
    episode_id: str
    closed: bool


class ExploreOutput(BaseModel):
    database: str
    ok: bool
    data: dict[str, Any]


def tool_result(text: str, structured: dict[str, Any], is_error: bool = False) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structuredContent=structured,
        isError=is_error,
    )


def step_result(episode_id: str, result: ToolResult) -> CallToolResult:
    return tool_result(result.text, result.structured(episode_id), not result.ok)


def step_error(episode_id: str, tool: str, error: SQLEnvError) -> CallToolResult:
    """An episode-level failure as an MCP tool error: no step is spent, and `done` is set
    when the episode cannot go on (unknown or finished), as the OpenEnv door does."""
    data = {"error": error_kind(error), "message": str(error)}
    structured = {
        "episode_id": episode_id,
        "tool": tool,
        "ok": False,
        "reward": 0.0,
        "done": ends_episode(error),
        "data": data,
    }
    return tool_result(error_text(error), structured, True)


def start_result(start: EpisodeStart) -> CallToolResult:
    structured = start.to_dict()
    del structured["text"]
    return tool_result(start.text, structured, False)


def explore_result(database: str, text: str, data: dict[str, Any], ok: bool) -> CallToolResult:
    return tool_result(text, {"database": database, "ok": ok, "data": data}, not ok)
