"""SQLEnvSkyRL through skyrl-gym's own registry and step loop, with a scripted model that writes
Hermes tool calls: the same text and rewards as the engine in process, malformed turns, a
hostile query."""

from __future__ import annotations

import json
import time

import pytest
import skyrl_gym

import doors.skyrl  # noqa: F401  (registers env_class sqlenv)
from env_core.calls import drive
from env_core.contract import opening_messages
from env_core.errors import InvalidArgumentError
from env_core.holder import EpisodeHolder
from env_core.oracle import oracle_calls
from env_core.settings import Settings
from tests.conftest import SPIDER_DEV
from training.datasets import task_prompt


def _hermes(tool: str, arguments: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': tool, 'arguments': arguments})}\n</tool_call>"


def _make(manager, question_id: str):
    # SkyRL's generator passes its max_turns (generator.max_turns, 1 unless set) in extras.
    extras = {"extra_info": {"question_id": question_id, "split": SPIDER_DEV}, "max_turns": 1}
    return skyrl_gym.make("sqlenv", env_config={}, extras=extras, manager=manager)


def _question(manager):
    return next(iter(manager.catalog.questions(SPIDER_DEV)))


def test_a_skyrl_episode_gives_the_engines_text_and_rewards(spider_manager):
    question = _question(spider_manager)
    engine = EpisodeHolder(spider_manager, idle="")
    start = engine.start(question_id=question.id, split=SPIDER_DEV).start.text
    play = oracle_calls(question, Settings.max_steps, Settings.max_rows)
    made = drive(play, lambda call: engine.call(call.tool, call.arguments), Settings.max_steps)
    expected = [result for _, result in made]

    env = _make(spider_manager, question.id)
    prompt, _ = env.init(task_prompt())
    outputs = [env.step(_hermes(call.tool, call.arguments)) for call, _ in made]
    env.close()

    assert prompt[-1]["content"] == start
    assert [o["observations"] for o in outputs] == [
        [{"role": "user", "content": r.text}] for r in expected
    ]
    assert [o["reward"] for o in outputs] == [r.reward for r in expected]
    assert outputs[-1]["done"] and outputs[-1]["metadata"]["ok"]


def test_a_turn_without_a_well_formed_call_is_refused_as_a_malformed_call(spider_manager):
    env = _make(spider_manager, _question(spider_manager).id)
    env.init(task_prompt())
    for action in ("SELECT 1", "<tool_call>not json</tool_call>"):
        output = env.step(action)
        assert not output["done"] and not output["metadata"]["ok"]
        assert output["observations"][0]["role"] == "user"
        assert "tool" in output["observations"][0]["content"].lower()
    env.close()


def test_a_hostile_query_is_bounded_and_changes_nothing(spider_manager):
    question = _question(spider_manager)
    env = _make(spider_manager, question.id)
    env.init(task_prompt())
    dropped = env.step(_hermes("query", {"sql": "DROP TABLE singer"}))
    endless = env.step(
        _hermes(
            "query",
            {
                "sql": "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                "SELECT count(*) FROM r"
            },
        )
    )
    assert not dropped["metadata"]["ok"] and not endless["metadata"]["ok"]
    assert len(endless["observations"][0]["content"]) < 1_000
    described = env.step(_hermes("describe", {"table": "singer"}))
    env.close()
    assert question.db_id == "concert_singer" and described["metadata"]["ok"]


def test_a_parquet_dataset_written_by_our_code_starts_its_questions(spider_manager, tmp_path):
    import pandas

    from training.datasets import choose_questions, write_skyrl_parquet

    questions = choose_questions(spider_manager.catalog, SPIDER_DEV, limit=3)
    write_skyrl_parquet(questions, spider_manager.tools, str(tmp_path / "train.parquet"))
    rows = pandas.read_parquet(tmp_path / "train.parquet").to_dict("records")
    assert [row["env_class"] for row in rows] == ["sqlenv"] * 3
    for row, question in zip(rows, questions, strict=True):
        extras = {"extra_info": row["extra_info"], "reward_spec": row["reward_spec"]}
        env = skyrl_gym.make("sqlenv", env_config={}, extras=extras, manager=spider_manager)
        prompt, _ = env.init([dict(message) for message in row["prompt"]])
        assert question.text in prompt[-1]["content"]
        env.close()


def test_a_trajectory_of_calls_ends_when_the_engine_ends_its_episode(spider_manager):
    """SkyRL hands the environment its max_turns (1 by default): the turn limit is the step
    budget instead, so the episode is played to the engine's end."""
    question = _question(spider_manager)
    budget = spider_manager.settings.max_steps
    env = _make(spider_manager, question.id)
    env.init(task_prompt())
    outputs = [env.step(_hermes("describe", {"table": "singer"})) for _ in range(budget)]
    env.close()
    assert env.max_turns == budget
    assert [o["done"] for o in outputs] == [False] * (budget - 1) + [True]
    assert outputs[-1]["observations"][0]["content"].endswith(
        "Out of steps: the episode is over without an answer."
    )


def test_turns_without_a_step_end_the_episode_unanswered_at_the_turn_limit(spider_manager):
    """A turn with no well-formed call spends no step but is a turn: the last turn the budget
    allows ends the episode unanswered, with the wrong-answer reward."""
    question = _question(spider_manager)
    budget = spider_manager.settings.max_steps
    engine = EpisodeHolder(spider_manager, idle="")
    engine.start(question_id=question.id, split=SPIDER_DEV)
    unanswered = engine.abandon()
    engine.close("done")

    env = _make(spider_manager, question.id)
    env.init(task_prompt())
    outputs = [env.step("I will look at the tables.") for _ in range(budget)]
    assert [o["done"] for o in outputs] == [False] * (budget - 1) + [True]
    assert [o["reward"] for o in outputs] == [0.0] * (budget - 1) + [unanswered]
    env.close()
    assert spider_manager.stats().active == 0


def test_the_skyrl_opening_is_the_contract_opening(spider_manager):
    question = _question(spider_manager)
    env = _make(spider_manager, question.id)
    prompt, _ = env.init(task_prompt())
    env.close()
    engine = EpisodeHolder(spider_manager, idle="")
    start = engine.start(question_id=question.id, split=SPIDER_DEV).start.text
    engine.close("done")
    assert prompt == opening_messages(start)


def test_a_call_nested_deeper_than_json_can_be_read_is_refused_as_a_malformed_call(
    spider_manager,
):
    """Nesting past the interpreter's recursion limit makes json.loads raise RecursionError,
    which is not a ValueError: the turn is refused like any block that is not JSON."""
    env = _make(spider_manager, _question(spider_manager).id)
    env.init(task_prompt())
    deep = "[" * 100_000 + "]" * 100_000
    for action in (
        f"<tool_call>{deep}</tool_call>",
        f'<tool_call>{{"name": "query", "arguments": {{"sql": {deep}}}}}</tool_call>',
    ):
        output = env.step(action)
        assert not output["done"] and output["reward"] == 0.0
        assert output["observations"][0]["content"].startswith("Error: unknown tool ''")
    assert env.step(_hermes("describe", {"table": "singer"}))["metadata"]["ok"]
    env.close()


def _best_step_s(env, action: str) -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        env.step(action)
        best = min(best, time.perf_counter() - started)
    return best


def test_a_turn_repeating_an_unclosed_think_tag_costs_time_in_proportion_to_its_length(
    spider_manager,
):
    """Each unclosed <think> must not send a search through the rest of the turn: 16,000 of
    them (112 KB) cost no more than the same length of closed thinking blocks."""
    env = _make(spider_manager, _question(spider_manager).id)
    env.init(task_prompt())
    unclosed = "<think>" * 16_000
    closed = ("<think></think>" * len(unclosed))[: len(unclosed)]
    ratio = _best_step_s(env, unclosed) / _best_step_s(env, closed)
    env.close()
    assert ratio < 10, f"unclosed tags took {ratio:.0f}x the time of closed ones"


def test_a_row_that_cannot_open_an_episode_is_refused_and_starts_none(spider_manager):
    """A prompt whose last turn has no text to add the opening to, or an `extra_info` that is
    not a mapping, is refused with the reason, and no episode is left holding a slot."""
    question_id = _question(spider_manager).id
    for prompt in ([], [{"role": "user"}], [{"role": "user", "content": [{"text": "hi"}]}]):
        env = _make(spider_manager, question_id)
        with pytest.raises(InvalidArgumentError, match="the prompt must end with a turn"):
            env.init(prompt)
        assert spider_manager.stats().active == 0
    for extra_info in (["question_id", question_id], "dev"):
        with pytest.raises(InvalidArgumentError, match="extra_info must be a mapping"):
            skyrl_gym.make(
                "sqlenv", env_config={}, extras={"extra_info": extra_info}, manager=spider_manager
            )
    assert spider_manager.stats().created == 0


@pytest.mark.parametrize("limit", [-1, 0])
def test_a_skyrl_dataset_cut_to_a_limit_below_one_is_refused(spider_manager, tmp_path, limit):
    """The documented recipe, `choose_questions(..., limit=...)` then `write_skyrl_parquet`:
    a slice took -1 as every question but one and 0 as all of them."""
    from training.datasets import choose_questions, write_skyrl_parquet

    with pytest.raises(
        InvalidArgumentError, match=f"limit must be a whole number, 1 or more, not {limit}"
    ):
        questions = choose_questions(spider_manager.catalog, SPIDER_DEV, limit=limit)
        write_skyrl_parquet(questions, spider_manager.tools, str(tmp_path / "train.parquet"))
    assert list(tmp_path.iterdir()) == []
