"""The four tools, defined once: name, description and JSON schema of the parameters.

Every door (MCP, OpenEnv, TRL) builds its tool list from `tool_specs` with the limits it serves,
so the descriptions an agent reads are the same whichever door it comes through.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from env_core.errors import InvalidArgumentError, listed


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    read_only: bool
    arg_descriptions: dict[str, str] = field(default_factory=dict)


def _schema(properties: dict[str, dict[str, Any]], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


TABLE_ARG = "Name of a table in the episode's database, as listed at the start."
QUERY_SQL = "One read-only SQLite SELECT statement."
ANSWER_VALUE = (
    "The answer: a single value, a JSON list of values, or a JSON list of rows "
    '(e.g. 42, ["Paris", "Rome"] or [["Paris", 3], ["Rome", 2]]).'
)
DEFAULT_SAMPLE_ROWS = 5


@functools.cache
def tool_specs(max_rows: int = 20, max_sample_rows: int = 20) -> tuple[ToolSpec, ...]:
    """The tools as agents read them, with the row limits in force, in name order: the order
    TRL lists an environment's methods in, so every door shows one list."""
    sample_n = f"How many rows to show (1 to {max_sample_rows})."
    return (
        ToolSpec(
            name="answer",
            description="Submit the final answer to the question. This ends the episode.",
            parameters=_schema(
                {"value": {"type": "string", "description": ANSWER_VALUE}}, ["value"]
            ),
            read_only=False,
            arg_descriptions={"value": ANSWER_VALUE},
        ),
        ToolSpec(
            name="describe",
            description="Show a table's columns with their types, its primary key, its foreign "
            "keys and its row count.",
            parameters=_schema({"table": {"type": "string", "description": TABLE_ARG}}, ["table"]),
            read_only=True,
            arg_descriptions={"table": TABLE_ARG},
        ),
        ToolSpec(
            name="query",
            description="Run one read-only SQL SELECT statement (SQLite dialect) and show the "
            f"result: at most {max_rows} rows, with a note when more exist.",
            parameters=_schema({"sql": {"type": "string", "description": QUERY_SQL}}, ["sql"]),
            read_only=True,
            arg_descriptions={"sql": QUERY_SQL},
        ),
        ToolSpec(
            name="sample",
            description="Show the first rows of a table.",
            parameters=_schema(
                {
                    "table": {"type": "string", "description": TABLE_ARG},
                    "n": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": max_sample_rows,
                        "default": DEFAULT_SAMPLE_ROWS,
                        "description": sample_n,
                    },
                },
                ["table"],
            ),
            read_only=True,
            arg_descriptions={"table": TABLE_ARG, "n": sample_n},
        ),
    )


@functools.cache
def specs_by_name(max_rows: int = 20, max_sample_rows: int = 20) -> dict[str, ToolSpec]:
    return {spec.name: spec for spec in tool_specs(max_rows, max_sample_rows)}


def tools_for(limits: Any) -> tuple[ToolSpec, ...]:
    """The tools under an executor's limits (an `ExecutorLimits`)."""
    return tool_specs(limits.max_rows, limits.max_sample_rows)


TOOLS: tuple[ToolSpec, ...] = tool_specs()
TOOLS_BY_NAME: dict[str, ToolSpec] = specs_by_name()


def check_names(tool: str, arguments: Mapping[str, Any], names: Collection[str]) -> None:
    """Raise `InvalidArgumentError` if an argument is not one of the tool's parameters."""
    if unknown := arguments.keys() - names:
        raise InvalidArgumentError(
            f"{tool} does not take {listed([str(name) for name in unknown])}; "
            f"it takes: {', '.join(names) or 'nothing'}"
        )


def check_arguments(spec: ToolSpec, arguments: Mapping[str, Any]) -> None:
    """Raise `InvalidArgumentError` unless the arguments fit the tool's parameter schema."""
    tool = spec.name
    properties = spec.parameters["properties"]
    check_names(tool, arguments, properties)
    missing = [name for name in spec.parameters["required"] if name not in arguments]
    if missing:
        raise InvalidArgumentError(f"{tool} needs {', '.join(missing)}")
    for name, value in arguments.items():
        expected = properties[name]["type"]
        if expected == "string" and tool != "answer" and not isinstance(value, str):
            raise InvalidArgumentError(f"{tool}: {name} must be a string")
        if isinstance(value, str):
            check_text(f"{tool}: {name}", value)
        if expected == "integer":
            low, high = properties[name]["minimum"], properties[name]["maximum"]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidArgumentError(
                    f"{tool}: {name} must be a whole number from {low} to {high}"
                )


def check_text(label: str, text: str) -> None:
    """Text must be encodable: JSON lets a client send a lone surrogate such as \\ud800."""
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise InvalidArgumentError(
                f"{label} is not valid Unicode text (it holds a lone surrogate)"
            ) from None
