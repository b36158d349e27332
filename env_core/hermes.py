"""Tool calls in the Hermes/Qwen format that chat templates teach models, as a model's text
holds them (the evaluation's local models and the SkyRL door read them):

<tool_call>
{"name": "describe", "arguments": {"table": "singer"}}
</tool_call>
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RawToolCall:
    """A tool call as the model wrote it; `arguments` may be a JSON string or an object."""

    id: str
    name: str
    arguments: Any


@dataclass(frozen=True)
class ModelTurn:
    content: str
    tool_calls: list[RawToolCall]


TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
THINK, THOUGHT = "<think>", "</think>"


def parse_hermes(text: str, call_id_prefix: str = "call") -> ModelTurn:
    """Split generated text into content and tool calls; a block that is not a JSON object with
    a string `name` becomes a call with an empty name, so the loop counts it as malformed."""
    calls = []
    for number, match in enumerate(TOOL_CALL.finditer(text)):
        payload = _json(match.group(1).strip())
        if isinstance(payload, dict) and isinstance(payload.get("name"), str):
            name, arguments = payload["name"], payload.get("arguments", {})
        else:
            name, arguments = "", None
        calls.append(RawToolCall(f"{call_id_prefix}_{number}", name, arguments))
    content = _without_thinking(TOOL_CALL.sub("", text)).strip()
    return ModelTurn(content, calls)


def _without_thinking(text: str) -> str:
    """`text` without its `<think>...</think>` blocks, in one pass: a regex search for each
    unclosed `<think>` would read the rest of the text again, so a turn repeating the tag
    would cost time in the square of its length."""
    kept, at = [], 0
    while (start := text.find(THINK, at)) != -1 and (end := text.find(THOUGHT, start)) != -1:
        kept.append(text[at:start])
        at = end + len(THOUGHT)
    kept.append(text[at:])
    return "".join(kept)


def _json(text: str) -> Any:
    """The JSON value `text` holds, or None; nesting deeper than the interpreter's recursion
    limit is not JSON a call can hold either."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def parse_arguments(raw: Any) -> dict[str, Any] | None:
    """The call's arguments as a dict, or None when they are not a JSON object."""
    if isinstance(raw, str):
        raw = _json(raw or "{}")
    return raw if isinstance(raw, dict) else None


def tools_prompt(tools: list[dict[str, Any]]) -> str:
    """The tools as a Hermes chat template (Qwen2.5's, Qwen3's) writes them into the system
    turn from a `tools` list: each function schema as a JSON line in <tools>, then the form of
    a call. For a trainer whose prompts are rendered with no `tools` list (SkyRL's)."""
    schemas = "".join(f"\n{json.dumps(tool, ensure_ascii=False)}" for tool in tools)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>{schemas}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, '
        '"arguments": <args-json-object>}\n</tool_call>'
    )
