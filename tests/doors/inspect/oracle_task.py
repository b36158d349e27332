"""The door's task with a scripted model, for `inspect eval` on the command line:

    inspect eval tests/doors/inspect/oracle_task.py -T data_dir=DIR -T split=SPLIT -T limit=4 \\
        -T wrong=1 --max-samples 1

(Inspect makes the task in this file's folder: DIR is whole, or relative to that folder.)
mockllm/model makes the oracle's calls on each question (played first in process), but answers
the question at position `wrong` with a value no gold is. Each reply carries its token usage:
mockllm counts the tokens of a reply without one with tiktoken's o200k_base encoding, which
tiktoken downloads on first use. One sample at a time (`--max-samples 1`), so the samples take
the replies in turn.
"""

from __future__ import annotations

from inspect_ai import Task, task, task_with
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from doors.inspect_task import sqlenv_task
from env_core.calls import ToolCall, drive
from env_core.factory import shared_manager
from env_core.holder import EpisodeHolder
from env_core.manager import EpisodeManager
from env_core.oracle import oracle_calls

NO_GOLD = {"value": "[]"}  # an empty result is never a gold: degenerate golds are excluded


def reply(call: ToolCall) -> ModelOutput:
    output = ModelOutput.for_tool_call("mockllm/model", call.tool, call.arguments)
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output


def oracle_play(manager: EpisodeManager, question_id: str) -> list[ToolCall]:
    """The calls the oracle makes on a question, played on the engine in process."""
    holder = EpisodeHolder(manager, idle="the oracle's episode is over")
    episode = holder.start(question_id=question_id)
    play = oracle_calls(episode.question, episode.max_steps, manager.limits.max_rows)
    try:
        made = drive(play, lambda call: holder.call(call.tool, call.arguments), episode.max_steps)
    finally:
        holder.close("the oracle's episode is over")
    return [call for call, _ in made]


def scripted_calls(manager: EpisodeManager, question_ids: list[str], wrong: int | None):
    """The oracle's calls on each question in turn, the answer at position `wrong` made wrong."""
    plays = [oracle_play(manager, question_id) for question_id in question_ids]
    if wrong is not None:
        plays[wrong][-1] = ToolCall("answer", NO_GOLD)
    return plays


@task
def oracle_sqlenv_task(data_dir: str, split: str, limit: int, wrong: int | None = None) -> Task:
    """`sqlenv_task`'s first `limit` questions, played by the scripted model."""
    played = sqlenv_task(data_dir=data_dir, split=split, limit=limit)
    manager = shared_manager(data_dir=data_dir, split=split)
    question_ids = [str(sample.id) for sample in played.dataset]
    plays = scripted_calls(manager, question_ids, wrong)
    outputs = [reply(call) for calls in plays for call in calls]
    return task_with(played, model=get_model("mockllm/model", custom_outputs=outputs))
