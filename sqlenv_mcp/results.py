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
from env_core.errors import SQLEnvError, error_data
from env_core.render import error_text


class StepOutput(BaseModel):
    episode_id: str
    tool: str
    ok: bool
    reward: float
    done: bool
    data: dict[str, Any]


class StartOutput(BaseModel):
    """An episode's start; when none could start, `error` says why (as OpenEnv's reset does)."""

    episode_id: str | None = None
    question: str | None = None
    db_id: str | None = None
    tables: list[str] = []
    budget: int = 0
    error: dict[str, str] | None = None


class EndOutput(BaseModel):
    episode_id: str | None = None
    closed: bool = False
    error: dict[str, str] | None = None


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


def error_result(error: SQLEnvError) -> CallToolResult:
    """start_episode's or end_episode's failure: the engine's error text, `error` set."""
    return tool_result(error_text(error), {"error": error_data(error)}, is_error=True)


def start_result(start: EpisodeStart) -> CallToolResult:
    structured = start.to_dict()
    del structured["text"]
    return tool_result(start.text, structured, False)


def explore_result(database: str, text: str, data: dict[str, Any], ok: bool) -> CallToolResult:
    return tool_result(text, {"database": database, "ok": ok, "data": data}, not ok)
