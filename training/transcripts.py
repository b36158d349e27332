"""SFT warm-start data: the oracle policy played through `SQLEnvTRL`, recorded as chat messages.

The transcripts are what a GRPO rollout would look like if the model played the oracle: the
same prompt (instructions plus the engine's opening text), one tool call per assistant turn,
the tools' text as tool messages, and a closing turn, because TRL gives the model one more turn
after every tool round. Rendered with the target tokenizer's chat template and the tool list
TRL builds (`tool_methods`), they train exactly the format GRPO samples from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from datasets import Dataset
from transformers.utils import get_json_schema

from doors.trl import SQLEnvTRL, tool_methods
from env_core.calls import ToolCall, drive
from env_core.catalog import Question
from env_core.episode import ToolResult
from env_core.oracle import oracle_calls
from training.datasets import task_prompt

CLOSING = "Done."

Message = dict[str, Any]


def tool_schemas(environment: SQLEnvTRL) -> list[dict[str, Any]]:
    """The JSON schemas TRL renders in the prompt, in its order."""
    return [get_json_schema(method) for method in tool_methods(environment)]


def tool_call_message(tool: str, arguments: dict[str, Any]) -> Message:
    # Arguments as a JSON string: a dataset column of dicts would merge every tool's argument
    # names into one struct (null-filled), while Qwen-style templates render strings verbatim
    # and json.dumps writes what the templates' `tojson` writes.
    call = {"name": tool, "arguments": json.dumps(arguments, ensure_ascii=False)}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": call}],
    }


def first_turn(environment: SQLEnvTRL, question: Question) -> list[Message]:
    """Start `question`'s episode; the prompt as GRPO sees it, completed by `reset`'s text."""
    prompt = task_prompt()
    opening = environment.reset(question_id=question.id)
    return [*prompt[:-1], {**prompt[-1], "content": prompt[-1]["content"] + opening}]


def oracle_transcript(environment: SQLEnvTRL, question: Question) -> list[Message] | None:
    """The oracle's episode on `question` as messages, or None if it did not answer correctly."""
    messages = first_turn(environment, question)
    episode = environment.episode

    def call_through_the_environment(call: ToolCall) -> ToolResult:
        text = getattr(environment, call.tool)(**call.arguments)
        messages.append(tool_call_message(call.tool, call.arguments))
        messages.append({"role": "tool", "name": call.tool, "content": text})
        return episode.history[-1].result

    drive(
        oracle_calls(question, episode.budget_left, episode.executor.limits.max_rows),
        call_through_the_environment,
        episode.budget_left,
    )
    if not episode.correct:
        return None
    return [*messages, {"role": "assistant", "content": CLOSING}]


def transcript_chars(messages: Iterable[Message]) -> int:
    return sum(len(m["content"]) for m in messages)


def sft_dataset(
    environment: SQLEnvTRL, questions: Iterable[Question], max_chars: int | None = None
) -> Dataset:
    """Columns `messages` and `tools` (JSON), the conversational format `SFTTrainer` takes.

    Questions the oracle gets wrong, and transcripts longer than `max_chars` of message text,
    are left out.
    """
    tools = json.dumps(tool_schemas(environment))
    rows = []
    for question in questions:
        messages = oracle_transcript(environment, question)
        if messages and (max_chars is None or transcript_chars(messages) <= max_chars):
            rows.append({"messages": messages, "tools": tools, "question_id": question.id})
    return Dataset.from_list(rows)
