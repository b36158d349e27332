"""The four tools, defined once: name, description and JSON schema of the parameters.

Every door (MCP, OpenEnv, TRL) builds its tool list from `TOOLS`, so the descriptions an
agent reads are the same whichever door it comes through.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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

DESCRIBE = ToolSpec(
    name="describe",
    description="Show a table's columns with their types, its primary key, its foreign keys "
    "and its row count.",
    parameters=_schema({"table": {"type": "string", "description": TABLE_ARG}}, ["table"]),
    read_only=True,
    arg_descriptions={"table": TABLE_ARG},
)

SAMPLE_N = "How many rows to show (1 to 20)."
SAMPLE = ToolSpec(
    name="sample",
    description="Show the first rows of a table.",
    parameters=_schema(
        {
            "table": {"type": "string", "description": TABLE_ARG},
            "n": {
                "type": "integer",
                "minimum": 1,
                "maximum": 20,
                "default": 5,
                "description": SAMPLE_N,
            },
        },
        ["table"],
    ),
    read_only=True,
    arg_descriptions={"table": TABLE_ARG, "n": SAMPLE_N},
)

QUERY_SQL = "One read-only SQLite SELECT statement."
QUERY = ToolSpec(
    name="query",
    description="Run one read-only SQL SELECT statement (SQLite dialect) and show the result: "
    "at most 20 rows, with a note when more exist.",
    parameters=_schema({"sql": {"type": "string", "description": QUERY_SQL}}, ["sql"]),
    read_only=True,
    arg_descriptions={"sql": QUERY_SQL},
)

ANSWER_VALUE = (
    "The answer: a single value, a JSON list of values, or a JSON list of rows "
    '(e.g. 42, ["Paris", "Rome"] or [["Paris", 3], ["Rome", 2]]).'
)
ANSWER = ToolSpec(
    name="answer",
    description="Submit the final answer to the question. This ends the episode.",
    parameters=_schema({"value": {"type": "string", "description": ANSWER_VALUE}}, ["value"]),
    read_only=False,
    arg_descriptions={"value": ANSWER_VALUE},
)

TOOLS: tuple[ToolSpec, ...] = (DESCRIBE, SAMPLE, QUERY, ANSWER)
TOOLS_BY_NAME: dict[str, ToolSpec] = {tool.name: tool for tool in TOOLS}
