"""The tools, defined once in one table: each entry holds what an agent reads of a tool (name,
description, JSON schema of the parameters) and what the tool does (its handler: what it asks
the executor and how the result reads).

Every door lists the tools from `tool_specs` under the limits it serves, so the descriptions an
agent reads are the same whichever door it comes through; the episode (and the MCP door's
explorer mode) make a call through its entry's handler. `answer` has no handler: the episode
checks it against the gold, and it ends the episode.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from env_core import render
from env_core.errors import InvalidArgumentError, listed
from env_core.settings import Settings

if TYPE_CHECKING:
    from env_core.layouts import ColumnNotes
    from env_core.sandbox import Work


class Explored(NamedTuple):
    """What a tool that explores returns: text for language models, data for programs, and
    the table it looked at (the rewards count the tables explored), if any. A tuple: one is
    made on every call."""

    text: str
    data: dict[str, Any]
    table: str | None = None


@dataclass(frozen=True, slots=True)
class Target:
    """What a call explores: a database's `ReadOnlyExecutor` (whose module imports this one),
    the client asking (the sandbox shares its workers out by client) and what the dataset
    says of the database's columns, by table (BIRD's descriptions)."""

    executor: Any
    client: str | None = None
    column_notes: ColumnNotes = field(default_factory=dict)


# A tool's work on its target, given arguments its schema allows (see `check_arguments`).
Handler = Callable[[Target, dict[str, Any]], "Work[Explored]"]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    read_only: bool
    arg_descriptions: dict[str, str] = field(default_factory=dict)
    # None for the answer, which the episode checks itself (it ends the episode).
    handler: Handler | None = None

    @property
    def ends_episode(self) -> bool:
        return self.handler is None


def object_schema(
    properties: dict[str, dict[str, Any]], required: list[str] | None = None
) -> dict[str, Any]:
    """The JSON schema of a tool's parameters: these, and no others."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema | {"additionalProperties": False}


TABLE_ARG = "Name of a table in the episode's database, as listed at the start."
QUERY_SQL = "One read-only SQLite SELECT statement."
ANSWER_VALUE = (
    "The answer: a single value, a JSON list of values, or a JSON list of rows "
    '(e.g. 42, ["Paris", "Rome"] or [["Paris", 3], ["Rome", 2]]).'
)
# How many rows sample shows when a call does not say.
SAMPLE_ROWS = 5


def _describe(target: Target, arguments: dict[str, Any]) -> Work[Explored]:
    yield from ()  # asks the sandbox nothing: the schema is read on the episode's connection
    schema = target.executor.describe(arguments["table"])
    notes = target.column_notes.get(schema.name.casefold())
    text = render.schema_text(schema, notes) if notes else schema.text
    return Explored(text, render.schema_data(schema), schema.name)


def _sample(target: Target, arguments: dict[str, Any]) -> Work[Explored]:
    schema = target.executor.describe(arguments["table"])
    n = arguments.get("n", SAMPLE_ROWS)
    result = yield from target.executor.sample_work(schema, n, client=target.client)
    return Explored(result.text, render.rows_data(result), schema.name)


def _query(target: Target, arguments: dict[str, Any]) -> Work[Explored]:
    result = yield from target.executor.query_work(arguments["sql"], client=target.client)
    return Explored(result.text, render.rows_data(result))


@functools.cache
def tool_table(
    max_rows: int = Settings.max_rows, max_sample_rows: int = Settings.max_rows
) -> tuple[ToolSpec, ...]:
    """The tools with the row limits in force, in the order an agent is told of them."""
    sample_n = f"How many rows to show (1 to {max_sample_rows})."
    return (
        ToolSpec(
            name="describe",
            description="Show a table's columns with their types, its primary key, its foreign "
            "keys and its row count.",
            parameters=object_schema(
                {"table": {"type": "string", "description": TABLE_ARG}}, ["table"]
            ),
            read_only=True,
            arg_descriptions={"table": TABLE_ARG},
            handler=_describe,
        ),
        ToolSpec(
            name="sample",
            description="Show the first rows of a table.",
            parameters=object_schema(
                {
                    "table": {"type": "string", "description": TABLE_ARG},
                    "n": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": max_sample_rows,
                        "default": SAMPLE_ROWS,
                        "description": sample_n,
                    },
                },
                ["table"],
            ),
            read_only=True,
            arg_descriptions={"table": TABLE_ARG, "n": sample_n},
            handler=_sample,
        ),
        ToolSpec(
            name="query",
            description="Run one read-only SQL SELECT statement (SQLite dialect) and show the "
            f"result: at most {max_rows} rows, with a note when more exist.",
            parameters=object_schema(
                {"sql": {"type": "string", "description": QUERY_SQL}}, ["sql"]
            ),
            read_only=True,
            arg_descriptions={"sql": QUERY_SQL},
            handler=_query,
        ),
        ToolSpec(
            name="answer",
            description="Submit the final answer to the question. This ends the episode.",
            parameters=object_schema(
                {"value": {"type": "string", "description": ANSWER_VALUE}}, ["value"]
            ),
            read_only=False,
            arg_descriptions={"value": ANSWER_VALUE},
        ),
    )


@functools.cache
def tool_specs(
    max_rows: int = Settings.max_rows, max_sample_rows: int = Settings.max_rows
) -> tuple[ToolSpec, ...]:
    """The tools as doors list them, in name order: the order TRL lists an environment's
    methods in, so every door shows one list."""
    return tuple(sorted(tool_table(max_rows, max_sample_rows), key=lambda spec: spec.name))


@functools.cache
def specs_by_name(
    max_rows: int = Settings.max_rows, max_sample_rows: int = Settings.max_rows
) -> dict[str, ToolSpec]:
    return {spec.name: spec for spec in tool_specs(max_rows, max_sample_rows)}


def tools_for(limits: Any) -> tuple[ToolSpec, ...]:
    """The tools under an executor's limits (an `ExecutorLimits`)."""
    return tool_specs(limits.max_rows, limits.max_sample_rows)


def exploring(
    max_rows: int = Settings.max_rows, max_sample_rows: int = Settings.max_rows
) -> tuple[ToolSpec, ...]:
    """The tools that explore (every one but the answer), in the order an agent is told of
    them."""
    return tuple(spec for spec in tool_table(max_rows, max_sample_rows) if not spec.ends_episode)


TOOLS: tuple[ToolSpec, ...] = tool_specs()
TOOLS_BY_NAME: dict[str, ToolSpec] = specs_by_name()
EXPLORING: tuple[ToolSpec, ...] = exploring()


def call_forms(specs: tuple[ToolSpec, ...]) -> str:
    """The tools as calls with their parameters' names: "describe(table), sample(table, n)"."""
    return ", ".join(f"{spec.name}({', '.join(spec.parameters['properties'])})" for spec in specs)


PYTHON_TYPES = {"string": str, "integer": int}


def python_parameters(spec: ToolSpec) -> list[inspect.Parameter]:
    """The tool's parameters as a Python method declares them, for the doors that make one
    method of each tool (TRL's environment, the OpenEnv client)."""
    required = spec.parameters.get("required", [])
    return [
        inspect.Parameter(
            name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=inspect.Parameter.empty if name in required else schema["default"],
            annotation=PYTHON_TYPES[schema["type"]],
        )
        for name, schema in spec.parameters["properties"].items()
    ]


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
    missing = [name for name in spec.parameters.get("required", []) if name not in arguments]
    if missing:
        raise InvalidArgumentError(f"{tool} needs {', '.join(missing)}")
    any_value = spec.ends_episode  # an answer may be any JSON value: the checker reads it
    for name, value in arguments.items():
        expected = properties[name]["type"]
        if expected == "string" and not any_value and not isinstance(value, str):
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
