"""Wilson intervals, the episode plan and summaries built from real records."""

import pytest

from evals.metrics import Summary, wilson_interval
from evals.plan import plan_episodes
from evals.play import EpisodeRecord, StepRecord


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        # Reference values of the Wilson score interval at 95% (z = 1.96).
        (0, 10, 0.0, 0.2775),
        (1, 10, 0.0179, 0.4042),
        (5, 10, 0.2366, 0.7634),
        (10, 10, 0.7225, 1.0),
        (81, 263, 0.2553, 0.3662),
    ],
)
def test_wilson_interval_matches_reference_values(successes, n, low, high):
    interval = wilson_interval(successes, n)
    assert interval.rate == successes / n
    assert interval.low == pytest.approx(low, abs=1e-4)
    assert interval.high == pytest.approx(high, abs=1e-4)


def test_wilson_interval_is_exact_at_the_ends_and_refuses_impossible_counts():
    assert wilson_interval(896, 896).high == 1.0
    assert wilson_interval(0, 896).low == 0.0
    assert wilson_interval(0, 0).n == 0
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_the_plan_asks_every_question_once_per_pass_and_depends_only_on_the_seed(
    spider_catalog,
):
    questions = spider_catalog.questions("dev_without_wta_1")
    everything = plan_episodes(questions, len(questions), seed=4)
    assert sorted(t.question_id for t in everything) == sorted(q.id for q in questions)
    assert plan_episodes(questions, 50, seed=4) == everything[:50]
    assert plan_episodes(questions, 50, seed=5) != everything[:50]
    twice = plan_episodes(questions, 2 * len(questions), seed=4)
    assert [t.index for t in twice] == list(range(2 * len(questions)))
    assert sorted(t.question_id for t in twice[len(questions) :]) == sorted(q.id for q in questions)


def _record(index: int, hardness: str, tools: list[str], correct: bool) -> EpisodeRecord:
    steps = [
        StepRecord(tool, {}, tool != "sample", 0.01, tool == "answer", "text", None)
        if tool != "sample"
        else StepRecord(tool, {}, False, -0.01, False, "Error: ...", "unknown_table")
        for tool in tools
    ]
    return EpisodeRecord(
        index,
        f"dev:{index}",
        "db",
        hardness,
        "p",
        "Question: ...",
        steps,
        round(sum(s.reward for s in steps) + correct, 6),
        answered=tools[-1] == "answer",
        correct=correct,
        notes={"malformed_calls": 1} if index == 0 else {},
    )


def test_summary_counts_success_hardness_tools_errors_and_notes():
    records = [
        _record(0, "easy", ["describe", "query", "answer"], True),
        _record(1, "easy", ["sample", "answer"], False),
        _record(2, "hard", ["describe", "describe"], False),
    ]
    summary = Summary.of(records)
    assert (summary.overall.episodes, summary.overall.success.successes) == (3, 1)
    assert summary.overall.avg_steps == pytest.approx(7 / 3)
    assert summary.by_hardness["easy"].success.rate == 0.5
    assert summary.by_hardness["medium"].episodes == 0
    assert summary.answered == 2
    assert summary.tool_use == {"answer": 2, "describe": 3, "query": 1, "sample": 1}
    assert summary.errors == {"unknown_table": 1}
    assert summary.notes == {"malformed_calls": 1}
