"""A tiny chat model built on this machine (no hub download), for tests and dry runs of the LLM
policies. The tokenizer is trained on oracle conversations in the policies' own prompt format,
by `training.tiny`; the weights are random, so its tool calls are mostly malformed: it proves
the plumbing, not the play.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evals.doors import Door, DoorSpec, open_door
from evals.evaluate import evaluate
from evals.llm.chat_loop import RawToolCall, assistant_message
from evals.llm.prompt import TOOL_SCHEMAS, Message, opening_messages
from evals.policies import OraclePolicy
from evals.runner import EpisodeRecord


def oracle_conversation(record: EpisodeRecord) -> list[Message]:
    """An oracle episode as the chat loop would have written it."""
    messages = opening_messages(record.opening)
    for number, step in enumerate(record.steps):
        call = RawToolCall(f"call_{number}", step.tool, step.arguments)
        messages += [
            assistant_message("", call, step.arguments),
            {
                "role": "tool",
                "tool_call_id": call.id,
                "name": step.tool,
                "content": step.observation,
            },
        ]
    return messages


def build_tiny_chat_model(door: Door, output_dir: Path, episodes: int = 40, seed: int = 0) -> Path:
    from training.tiny import build_tiny

    records = evaluate(door, OraclePolicy(), episodes, seed).records
    conversations = [oracle_conversation(record) for record in records]
    return build_tiny(conversations, TOOL_SCHEMAS, output_dir, seed)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m evals.llm.tiny", description="Build the tiny local chat model."
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for model and tokenizer")
    parser.add_argument("--data-dir", help="Spider-format directory (default: the demo data)")
    parser.add_argument("--split", default="dev")
    args = parser.parse_args(argv)
    door = open_door(DoorSpec("inprocess", args.data_dir, args.split))
    try:
        print(build_tiny_chat_model(door, args.out))
    finally:
        door.close()


if __name__ == "__main__":
    main()
