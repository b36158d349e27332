"""Structured tool outputs and their conversion to MCP results.

Tools return `CallToolResult` annotated with one of these models: the engine's text goes into
`content` unchanged (the same text every door shows) and the structured form into
`structuredContent`, validated against the model's small, flat schema.

A client validates every result against its tool's output schema, and the Python SDK's client
first checks the schema itself against its dialect's metaschema, on every call. Under JSON
Schema 2020-12, the default dialect, that check costs ~0.5 ms per subschema (its metaschema
resolves dynamic references); under draft-07 ~0.1 ms. So the schemas declare draft-07, which
every client's validator supports (the TypeScript SDK's Ajv defaults to it), and stay flat: one
level of typed properties, no titles, no nested alternatives (`docs/profiles.md`).
"""

from __future__ import annotations

from typing import Any

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field

from env_core.episode import EpisodeStart, ToolResult
from env_core.errors import SQLEnvError, error_data
from env_core.render import error_text

SCHEMA_DIALECT = "http://json-schema.org/draft-07/schema#"


def flat_schema(schema: dict[str, Any], _model: type | None = None) -> None:
    """Rewrite a model's JSON schema in place as the flat draft-07 schema clients check."""
    properties = {}
    for name, field in schema["properties"].items():
        kinds = [option["type"] for option in field.get("anyOf", [field])]
        flat: dict[str, Any] = {"type": kinds[0] if len(kinds) == 1 else kinds}
        flat.update({key: field[key] for key in ("items", "description") if key in field})
        properties[name] = flat
    kept = {key: schema[key] for key in ("description", "required") if key in schema}
    schema.clear()
    schema.update({"$schema": SCHEMA_DIALECT, "type": "object", "properties": properties, **kept})


class Output(BaseModel):
    model_config = ConfigDict(json_schema_extra=flat_schema)


class StepOutput(Output):
    episode_id: str
    tool: str
    ok: bool
    reward: float
    done: bool
    data: dict[str, Any] = Field(
        description="The tool's result: columns, rows and truncated (sample, query); the "
        "table's columns, keys and row count (describe); correct (answer); error and message "
        "when ok is false."
    )


class StartOutput(Output):
    """An episode's start; when none could start, `error` says why (as OpenEnv's reset does)."""

    episode_id: str | None = None
    question: str | None = None
    db_id: str | None = None
    tables: list[str] = []
    budget: int = 0
    error: dict[str, str] | None = None


class EndOutput(Output):
    episode_id: str | None = None
    closed: bool = False
    error: dict[str, str] | None = None


class ExploreOutput(Output):
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
