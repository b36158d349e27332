"""The agent contract, defined once: what an agent is told, the tools it is given and the first
message it reads. Training (the GRPO dataset, TRL's environment, SFT transcripts), every LLM
policy of the evaluation harness, the MCP server's instructions and prompt and the OpenEnv
metadata all take them from here, so a model is evaluated on exactly what it was trained on.
"""

from __future__ import annotations

from typing import Any

from env_core.tools import ToolSpec

INSTRUCTIONS = """\
You answer a question about a SQLite database whose schema is hidden from you. Explore it with \
the tools: describe(table) shows a table's columns and keys, sample(table, n) shows its first \
rows, query(sql) runs one read-only SQLite SELECT. Every call uses one step of a fixed budget. \
When you know the answer, call answer(value) once with exactly what the question asks for: a \
single value, a JSON list of values, or a JSON list of rows. Make exactly one tool call in \
each reply."""

Message = dict[str, Any]


def opening_messages(start_text: str) -> list[Message]:
    """The conversation's first turn: the instructions, then the episode's opening text."""
    return [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": start_text},
    ]


def chat_tools(specs: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    """The tools in the function-calling form chat templates render, exactly as TRL renders
    the environment's methods (a schema transformers writes from their docstrings)."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": {
                    "type": "object",
                    "properties": {
                        name: {"type": schema["type"], "description": schema["description"]}
                        for name, schema in spec.parameters["properties"].items()
                    },
                    "required": spec.parameters["required"],
                },
                "return": {"type": "string"},
            },
        }
        for spec in specs
    ]
