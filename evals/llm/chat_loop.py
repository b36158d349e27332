"""The tool-call loop every LLM policy shares.

Each model turn should hold one tool call. The first well-formed call is made; further calls in
the same turn are dropped (and counted). A turn with no usable call (no call, an unknown tool,
arguments that are not a JSON object) is a malformed call: it is counted, the model is told,
and after `MAX_MALFORMED_IN_A_ROW` such turns the policy gives up, leaving the episode
unanswered. Malformed turns spend no environment step.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from env_core.contract import Message, chat_tools, opening_messages
from env_core.hermes import ModelTurn, RawToolCall, parse_arguments
from env_core.tools import TOOLS, TOOLS_BY_NAME, ToolSpec
from evals.llm.prompt import NO_TOOL_CALL
from evals.policy import EpisodeContext, Play, ToolCall

MAX_MALFORMED_IN_A_ROW = 3


class ChatBackend(Protocol):
    def complete(self, messages: list[Message], tools: list[dict], seed: int) -> ModelTurn: ...


def usable_call(turn: ModelTurn) -> tuple[RawToolCall, dict[str, Any]] | None:
    for call in turn.tool_calls:
        arguments = parse_arguments(call.arguments)
        if call.name in TOOLS_BY_NAME and arguments is not None:
            value = arguments.get("value")
            if call.name == "answer" and value is not None and not isinstance(value, str):
                # The schema asks for a string; models often send 42 or ["a"]. Sent as JSON text,
                # the value means the same to the checker and passes every door's validation.
                arguments["value"] = json.dumps(value, ensure_ascii=False)
            return call, arguments
    return None


def assistant_message(content: str, call: RawToolCall, arguments: dict[str, Any]) -> Message:
    function = {"name": call.name, "arguments": json.dumps(arguments, ensure_ascii=False)}
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [{"id": call.id, "type": "function", "function": function}],
    }


class ChatPolicy:
    """A policy that asks a chat model for each tool call."""

    def __init__(
        self, name: str, backend: ChatBackend, tools: tuple[ToolSpec, ...] = TOOLS
    ) -> None:
        self.name = name
        self.backend = backend
        self.tools = chat_tools(tools)

    def play(self, context: EpisodeContext) -> Play:
        messages = opening_messages(context.start.text)
        malformed_in_a_row = 0
        while True:
            turn = self.backend.complete(messages, self.tools, context.rng.randrange(2**31))
            context.notes["model_turns"] += 1
            found = usable_call(turn)
            if found is None:
                context.notes["malformed_calls"] += 1
                malformed_in_a_row += 1
                if malformed_in_a_row >= MAX_MALFORMED_IN_A_ROW:
                    context.notes["gave_up"] += 1
                    return
                messages += [
                    {"role": "assistant", "content": turn.content},
                    {"role": "user", "content": NO_TOOL_CALL},
                ]
                continue
            malformed_in_a_row = 0
            call, arguments = found
            if len(turn.tool_calls) > 1:
                context.notes["dropped_tool_calls"] += len(turn.tool_calls) - 1
            messages.append(assistant_message(turn.content, call, arguments))
            result = yield ToolCall(call.name, arguments)
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result.text}
            )
