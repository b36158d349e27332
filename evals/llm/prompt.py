"""The one prompt every LLM policy gets, and the tools in the OpenAI function-calling form."""

from __future__ import annotations

from typing import Any

from env_core.tools import TOOLS

SYSTEM_PROMPT = """\
You answer questions about a SQLite database whose schema is hidden from you.
Explore it with the tools: describe(table) shows a table's columns and keys, sample(table, n)
shows its first rows, query(sql) runs one read-only SQLite SELECT. Every call uses one step of
a fixed budget. When you know the answer, call answer(value) once with exactly what the
question asks for: a single value, a JSON list of values, or a JSON list of rows. Make exactly
one tool call in each reply."""

NO_TOOL_CALL = (
    "Your reply did not contain a valid tool call. Reply with exactly one call to describe, "
    "sample, query or answer, with its arguments as a JSON object."
)

Message = dict[str, Any]

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }
    for tool in TOOLS
]


def opening_messages(start_text: str) -> list[Message]:
    """The system prompt, then the episode's opening text (question, database, tables, budget)."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": start_text},
    ]
