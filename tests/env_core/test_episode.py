import threading
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import pytest

from env_core.answers import AnswerChecker
from env_core.episode import MAX_KEPT_ARGUMENTS
from env_core.errors import EpisodeFinishedError
from env_core.manager import EpisodeManager
from env_core.oracle import play_oracle
from env_core.settings import Settings

DEV = "dev_without_wta_1"
SINGER_COUNT = f"{DEV}:0"  # "How many singers do we have?" -> 6


@pytest.fixture
def sessions(spider_catalog):
    manager = EpisodeManager(spider_catalog, Settings(split=DEV, max_steps=5))
    yield manager
    manager.shutdown()


@pytest.fixture
def episode(sessions):
    return sessions.create(question_id=SINGER_COUNT)


def test_describe_shows_columns_keys_and_row_count(episode):
    result = episode.call("describe", {"table": "singer_in_concert"})
    assert result.ok and not result.done
    assert result.text.startswith(
        "table singer_in_concert: 10 rows\ncolumns:\n  concert_ID INT primary key"
    )
    assert "  Singer_ID -> singer.Singer_ID" in result.text
    assert result.data["row_count"] == 10
    assert {
        "column": "concert_ID",
        "ref_table": "concert",
        "ref_column": "concert_ID",
    } in result.data["foreign_keys"]
    assert result.text.endswith("[4 steps left]")


def test_sample_and_query_render_rows(episode):
    sample = episode.call("sample", {"table": "SINGER", "n": 2})
    assert sample.text.splitlines()[0].startswith("Singer_ID | Name | Country")
    assert "(2 rows)" in sample.text
    assert len(sample.data["rows"]) == 2
    query = episode.call("query", {"sql": "SELECT Name, Age FROM singer ORDER BY Age DESC"})
    assert query.data["columns"] == ["Name", "Age"]
    assert query.data["rows"][0] == ["Joe Sharp", 52]
    assert query.data["truncated"] is False and query.data["elapsed_ms"] >= 0


def test_errors_are_results_that_cost_a_step(episode):
    result = episode.call("describe", {"table": "singers"})
    assert not result.ok and not result.done
    assert result.text.startswith(
        "Error: no such table: singers; tables are: concert, singer, singer_in_concert, stadium"
    )
    assert result.data["error"] == "unknown_table"
    bad = episode.call("query", {"sql": "DELETE FROM singer"})
    assert bad.data["error"] == "query_rejected"
    wrong_args = episode.call("sample", {"table": "singer", "rows": 3})
    assert "sample does not take 'rows'; it takes: table, n" in wrong_args.text
    assert episode.steps_used == 3 and episode.budget_left == 2


def test_correct_answer_ends_the_episode_with_the_terminal_reward(episode):
    episode.call("query", {"sql": "SELECT count(*) FROM singer"})
    result = episode.call("answer", {"value": "6"})
    assert result.done and result.data == {"correct": True}
    assert result.text == "Correct. The episode is over."
    assert result.reward == 1.0
    assert episode.correct is True
    with pytest.raises(EpisodeFinishedError, match="has ended"):
        episode.call("answer", {"value": "6"})


def test_running_out_of_steps_ends_with_the_wrong_answer_reward(episode):
    results = [episode.call("query", {"sql": f"SELECT {i}"}) for i in range(5)]
    assert [r.done for r in results] == [False] * 4 + [True]
    assert results[-1].text.endswith("Out of steps: the episode is over without an answer.")
    assert episode.correct is None
    with pytest.raises(EpisodeFinishedError, match="ran out of steps"):
        episode.call("answer", {"value": "6"})


def test_a_failed_calls_arguments_are_kept_cut_short_and_still_told_apart(episode):
    huge = "SELECT " + "x" * 1_000_000
    first = episode.call("query", {"sql": huge})
    again = episode.call("query", {"sql": huge})
    other = episode.call("query", {"sql": huge[:-1] + "y"})  # as long, and the same at first
    assert {result.data["error"] for result in (first, again, other)} == {"query_rejected"}
    assert [first.reward, again.reward, other.reward] == [-0.02, -0.04, -0.02]  # a repeat
    kept = [step.arguments["sql"] for step in episode.history]
    assert max(map(len, kept)) < 1_100
    assert kept[0] == kept[1] != kept[2]


def test_an_episode_holds_only_an_excerpt_of_the_arguments_it_refused(spider_catalog):
    manager = EpisodeManager(spider_catalog, Settings(split=DEV, max_steps=15))
    episode = manager.create(question_id=SINGER_COUNT)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(10):  # 1 MB each, refused: over the SQL length limit
            assert not episode.call("query", {"sql": f"SELECT {n} " + "é" * 1_000_000}).ok
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        manager.shutdown()
    assert held < 200_000, held


def test_an_episode_holds_and_names_only_a_few_of_the_arguments_a_tool_does_not_take(
    spider_catalog,
):
    """A client may send any number of names (380,000 fit in one MCP request): the error
    lists a few, and the episode keeps a few and a digest of the rest."""
    manager = EpisodeManager(spider_catalog, Settings(split=DEV, max_steps=15))
    episode = manager.create(question_id=SINGER_COUNT)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        results = []
        for n in range(10):
            names = {f"x{k}": n for k in range(100_000)}
            results.append(episode.call("describe", {"table": "singer", **names}))
            del names
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        manager.shutdown()
    assert held < 200_000, held
    listed = "'x0', 'x1', 'x10', 'x100', 'x1000' and 99,995 more; it takes: table"
    assert results[0].text.startswith(f"Error: describe does not take {listed}\n")
    assert len(results[0].text) < 200
    kept = [step.arguments for step in episode.history]
    assert [len(arguments) for arguments in kept] == [MAX_KEPT_ARGUMENTS + 1] * 10
    assert kept[0]["..."].startswith("99,993 more arguments (")
    assert len({arguments["..."] for arguments in kept}) == 10  # different calls, no repeats


def test_arguments_nested_deeper_than_python_reads_are_a_mistake_like_any_other(episode):
    deep: list = []
    for _ in range(5_000):
        deep = [deep]
    result = episode.call("describe", {"table": deep})
    assert (result.ok, result.data["error"]) == (False, "invalid_argument")
    assert result.text.startswith("Error: describe: table must be a string")
    assert episode.steps_used == 1


def test_oversize_answer_is_rejected_without_ending_the_episode(episode):
    result = episode.call("answer", {"value": "1" * 20_001})
    assert not result.ok and not result.done
    assert "limit is 20000" in result.text


def test_total_reward_is_the_sum_of_step_rewards(episode):
    episode.call("describe", {"table": "singer"})
    episode.call("describe", {"table": "singer"})
    episode.call("query", {"sql": "SELECT count(*) FROM singer"})
    episode.call("answer", {"value": "[[6]]"})
    rewards = [step.result.reward for step in episode.history]
    assert rewards == [0.01, -0.03, 0.02, 1.0]
    assert episode.total_reward == pytest.approx(sum(rewards))


def test_sparse_profile_rewards_only_the_answer(spider_catalog):
    config = Settings(split=DEV, reward_profile="sparse")
    episode = EpisodeManager(spider_catalog, config).create(question_id=SINGER_COUNT)
    play_oracle(episode)
    assert [step.result.reward for step in episode.history][:-1] == [0.0] * (episode.steps_used - 1)
    assert episode.total_reward == 1.0


def test_the_oracle_answers_correctly(episode):
    play_oracle(episode)
    assert episode.correct is True
    assert [step.tool for step in episode.history] == ["describe", "query", "answer"]


def test_abandoning_books_the_wrong_answer_reward_once(spider_catalog):
    config = Settings(split=DEV, reward_profile="potential")
    episode = EpisodeManager(spider_catalog, config).create(question_id=SINGER_COUNT)
    episode.call("describe", {"table": "singer"})
    episode.call("query", {"sql": "SELECT count(*) FROM singer"})
    assert episode.total_reward == pytest.approx(0.05)
    assert episode.abandon() == pytest.approx(-0.05)
    assert episode.total_reward == 0.0 and episode.done and episode.correct is None
    assert episode.abandon() == 0.0
    with pytest.raises(EpisodeFinishedError, match="was abandoned"):
        episode.call("answer", {"value": "6"})


def test_the_closing_total_is_the_total_an_ending_now_gives_and_ends_nothing(spider_catalog):
    config = Settings(split=DEV, reward_profile="potential")
    episode = EpisodeManager(spider_catalog, config).create(question_id=SINGER_COUNT)
    assert episode.closing_total == 0.0
    episode.call("describe", {"table": "singer"})
    episode.call("query", {"sql": "SELECT count(*) FROM singer"})
    assert episode.closing_total == episode.closing_total == 0.0  # the refund, not banked
    assert episode.total_reward == pytest.approx(0.05) and not episode.done
    episode.abandon()
    assert episode.closing_total == episode.total_reward == 0.0


class HeldChecker(AnswerChecker):
    """Checks answers as usual, once the test lets it go on."""

    def __init__(self) -> None:
        super().__init__()
        self.checking, self.go_on = threading.Event(), threading.Event()

    def check(self, gold, value):
        self.checking.set()
        self.go_on.wait(10)
        return super().check(gold, value)


def test_a_call_the_episode_was_abandoned_during_is_refused_and_books_nothing(spider_catalog):
    """TRL ends an unanswered episode when it asks for the reward: an answer still being
    checked then must not add its reward to a total already read, nor count as a step."""
    checker = HeldChecker()
    manager = EpisodeManager(spider_catalog, Settings(split=DEV), checker=checker)
    episode = manager.create(question_id=SINGER_COUNT)
    with ThreadPoolExecutor(1) as pool:
        answering = pool.submit(manager.step, episode.episode_id, "answer", {"value": "6"})
        assert checker.checking.wait(10)
        abandoned = episode.abandon()
        checker.go_on.set()
        late = answering.result(10)
    steps = manager.stats().steps
    manager.shutdown()
    assert episode.total_reward == abandoned and episode.correct is None
    assert episode.history == [] and steps == 0
    assert not late.ok and late.done and late.data["error"] == "episode_finished"
    assert "was abandoned while this call ran" in late.text
