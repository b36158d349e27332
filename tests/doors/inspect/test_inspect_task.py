"""The Inspect AI door run by Inspect itself: `inspect_ai.eval` with a scripted model."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model

import doors.inspect_task.task
from doors.inspect_task import sqlenv_task
from env_core.calls import drive
from env_core.errors import InvalidArgumentError
from env_core.factory import shared_manager
from env_core.holder import EpisodeHolder
from env_core.oracle import oracle_calls

SPIDER_DEV = "dev_without_wta_1"
QUESTIONS = 4


@pytest.fixture
def manager(spider_dir):
    return shared_manager(data_dir=str(spider_dir), split=SPIDER_DEV)


def run(spider_dir, tmp_path, outputs, limit=QUESTIONS):
    """One eval of the first `limit` dev questions, the model saying `outputs` in turn."""
    task = sqlenv_task(data_dir=str(spider_dir), split=SPIDER_DEV, limit=limit)
    model = get_model("mockllm/model", custom_outputs=outputs)
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path), max_samples=1, display="none")
    assert log.status == "success", log.error
    return read_eval_log(log.location)


def counted(output):
    # With usage given, mockllm counts no tokens (which would download tiktoken's encoding).
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output


def tool_call(tool, arguments):
    return counted(ModelOutput.for_tool_call("mockllm/model", tool, arguments))


def engine_step(holder, call):
    return holder.call(call.tool, call.arguments)


def oracle_episodes(manager, limit):
    """The oracle's calls on the first questions, with the engine's verdict and total reward."""
    episodes = []
    for question in manager.catalog.questions(SPIDER_DEV, None)[:limit]:
        holder = EpisodeHolder(manager, idle="none")
        episode = holder.start(question_id=question.id)
        play = oracle_calls(question, manager.settings.max_steps, manager.limits.max_rows)
        made = drive(play, functools.partial(engine_step, holder), manager.settings.max_steps)
        episodes.append(([call for call, _ in made], bool(episode.correct), episode.total_reward))
        holder.close("done")
    return episodes


def test_the_scorer_gives_the_engines_verdict_and_reward_on_the_oracles_calls(
    spider_dir, tmp_path, manager
):
    episodes = oracle_episodes(manager, QUESTIONS)
    outputs = [tool_call(c.tool, c.arguments) for calls, _, _ in episodes for c in calls]
    log = run(spider_dir, tmp_path, outputs)

    assert [s.metadata["question_id"] for s in log.samples] == [
        q.id for q in manager.catalog.questions(SPIDER_DEV, None)[:QUESTIONS]
    ]
    scores = [s.scores["engine_verdict"] for s in log.samples]
    assert [s.value == "C" for s in scores] == [correct for _, correct, _ in episodes]
    assert [s.metadata["reward"] for s in scores] == [reward for _, _, reward in episodes]
    accuracy = log.results.scores[0].metrics["accuracy"].value
    assert accuracy == sum(correct for _, correct, _ in episodes) / QUESTIONS > 0
    assert manager.stats().active == 0


def tool_texts(sample):
    return [(m.function, m.text, m.error) for m in sample.messages if m.role == "tool"]


def test_a_call_off_the_schema_is_refused_by_inspect_and_spends_no_step(
    spider_dir, tmp_path, manager
):
    """Inspect checks a call against the tool's schema before the tool runs: an unknown tool,
    a missing or mistyped argument get its parsing error, and the engine (which would answer
    with its own error and charge the step, as through the other doors) never sees them."""
    outputs = [
        tool_call("drop_table", {"table": "singer"}),
        tool_call("describe", {}),
        tool_call("sample", {"table": "singer", "n": "many"}),
        tool_call("describe", {"table": "singer"}),
        tool_call("answer", {"value": "1"}),
    ]
    log = run(spider_dir, tmp_path, outputs, limit=1)
    unknown, missing, mistyped, described, answer = tool_texts(log.samples[0])
    assert unknown[2].type == "parsing" and unknown[2].message == "Tool drop_table not found"
    assert missing[2].type == "parsing" and "'table' is a required property" in missing[2].message
    assert (
        mistyped[2].type == "parsing" and "'many' is not of type 'integer'" in mistyped[2].message
    )
    budget = manager.settings.max_steps
    assert described[1].endswith(f"[{budget - 1} steps left]")
    assert answer[1] == "Incorrect. The episode is over."
    assert log.samples[0].scores["engine_verdict"].value == "I"


def test_a_hostile_query_is_refused_briefly_and_changes_nothing(spider_dir, tmp_path, manager):
    question = manager.catalog.questions(SPIDER_DEV, None)[0]
    database = manager.catalog.database_path(question.db_id)
    before = database.read_bytes()
    hostile = [
        "DROP TABLE singer",
        "SELECT 1; DELETE FROM singer",
        "ATTACH DATABASE 'x.db' AS x",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
    ]
    outputs = [tool_call("query", {"sql": sql}) for sql in hostile]
    log = run(spider_dir, tmp_path, [*outputs, tool_call("answer", {"value": "0"})], limit=1)
    texts = [text for _, text, _ in tool_texts(log.samples[0])][: len(hostile)]
    assert all(text.startswith("Error") and len(text) < 400 for text in texts), texts
    assert database.read_bytes() == before
    assert manager.stats().active == 0


def test_an_episode_left_unanswered_scores_incorrect_with_the_wrong_answer_reward(
    spider_dir, tmp_path, manager
):
    """The model stops calling tools: react asks it to go on until the budget is spent."""
    question = manager.catalog.questions(SPIDER_DEV, None)[0]
    table = question.sql.split("FROM ")[1].split()[0]
    outputs = [tool_call("describe", {"table": table})] * manager.settings.max_steps
    log = run(spider_dir, tmp_path, outputs, limit=1)
    score = log.samples[0].scores["engine_verdict"]
    assert score.value == "I"
    assert score.metadata["reward"] < 0
    assert manager.stats().active == 0


def test_a_reply_without_a_tool_call_ends_the_episode_unanswered(spider_dir, tmp_path, manager):
    reply = counted(ModelOutput.from_content("mockllm/model", "I cannot tell."))
    log = run(spider_dir, tmp_path, [tool_call("describe", {"table": "singer"}), reply], limit=1)
    score = log.samples[0].scores["engine_verdict"]
    assert [m.role for m in log.samples[0].messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert score.value == "I"
    holder = EpisodeHolder(manager, idle="none")
    holder.start(question_id=log.samples[0].id)
    holder.call("describe", {"table": "singer"})
    assert score.metadata["reward"] == holder.abandon()
    holder.close("done")
    assert manager.stats().active == 0


@pytest.mark.parametrize("limit", [-1, 0, "five"])
def test_a_limit_that_is_not_a_positive_whole_number_is_refused_before_any_sample_runs(
    spider_dir, tmp_path, limit
):
    """`-T limit=-1` sliced the questions to all but the last one, and 0 left Inspect to say
    the dataset is empty: the task refuses both, as it refuses a limit that is not a number."""
    task_file = Path(doors.inspect_task.task.__file__)
    options = {"data_dir": str(spider_dir), "split": SPIDER_DEV, "limit": limit}
    with pytest.raises(InvalidArgumentError) as refused:
        inspect_eval(
            f"{task_file}@sqlenv_task",
            task_args=options,
            model="mockllm/model",
            limit=1,  # Inspect's own: before the task refused them, one sample ran
            log_dir=str(tmp_path),
            display="none",
        )
    assert str(refused.value) == f"limit must be a whole number, 1 or more, not {limit!r}"
    assert list(tmp_path.iterdir()) == []
