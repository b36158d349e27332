import gc
import threading

import pytest

from env_core.episode import refusal
from env_core.errors import (
    CapacityError,
    EpisodeFinishedError,
    QueryFailedError,
    SessionClosedError,
    UnknownEpisodeError,
    UnknownQuestionError,
)
from env_core.holder import EpisodeHolder, close_dropped
from env_core.manager import EpisodeManager
from env_core.settings import Settings

DEV = "dev_without_wta_1"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def manager(spider_catalog):
    sessions = EpisodeManager(spider_catalog, Settings(split=DEV, max_episodes=8))
    yield sessions
    sessions.shutdown()


def test_same_seed_and_selector_give_the_same_question(manager):
    for seed in range(20):
        first = manager.create(seed=seed)
        second = manager.create(seed=seed)
        assert first.question.id == second.question.id
        assert first.episode_id != second.episode_id
        manager.close(first.episode_id)
        manager.close(second.episode_id)


def test_seed_choice_is_spread_over_the_split(manager):
    chosen = set()
    for seed in range(40):
        episode = manager.create(seed=seed)
        chosen.add(episode.question.id)
        manager.close(episode.episode_id)
    assert len(chosen) >= 35


def test_selectors_by_id_db_and_split(manager):
    by_id = manager.create(question_id=f"{DEV}:7")
    assert by_id.question.id == f"{DEV}:7"
    by_db = manager.create(db_id="concert_singer", seed=3)
    assert by_db.question.db_id == "concert_singer"
    by_split = manager.create(split="train_spider_min", seed=3)
    assert by_split.question.split == "train_spider_min"
    assert by_db.start.tables == ("concert", "singer", "singer_in_concert", "stadium")


def test_start_reveals_question_db_tables_and_budget_only(manager):
    start = manager.create(question_id=f"{DEV}:0").start
    assert set(start.to_dict()) == {"episode_id", "question", "db_id", "tables", "budget", "text"}
    assert start.budget == 15
    assert "SELECT" not in start.text
    assert start.question in start.text and ", ".join(start.tables) in start.text


def test_capacity_limit_gives_a_clear_error(manager):
    episodes = [manager.create(seed=i) for i in range(8)]
    with pytest.raises(CapacityError, match="all 8 episode slots are in use"):
        manager.create(seed=99)
    assert manager.stats().active == 8
    manager.close(episodes[0].episode_id)
    manager.create(seed=99)


def test_unknown_and_closed_episodes(manager):
    episode = manager.create(seed=1)
    assert manager.close(episode.episode_id)
    assert not manager.close(episode.episode_id)
    refused = manager.step(episode.episode_id, "describe", {"table": "x"})
    assert refused == refusal("describe", UnknownEpisodeError(refused.data["message"]))
    assert refused.refused and refused.done and refused.reward == 0
    assert refused.data["error"] == "unknown_episode"
    assert (
        refused.text.startswith("Error: no open episode") and "start a new episode" in refused.text
    )
    with pytest.raises(UnknownEpisodeError):
        manager.get("no-such-id")


def test_finished_episode_rejects_further_calls(manager):
    episode = manager.create(seed=1)
    manager.step(episode.episode_id, "answer", {"value": "no idea"})
    refused = manager.step(episode.episode_id, "query", {"sql": "SELECT 1"})
    assert refused.refused and refused.done and refused.data["error"] == "episode_finished"
    assert "was answered" in refused.text
    assert episode.steps_used == 1
    with pytest.raises(EpisodeFinishedError, match="was answered"):
        episode.call("query", {"sql": "SELECT 1"})


def test_an_unknown_tool_is_refused_without_spending_a_step(manager):
    episode = manager.create(seed=1)
    refused = manager.step(episode.episode_id, "drop", {"table": "singer"})
    assert refused.data == {
        "error": "unknown_tool",
        "message": "unknown tool 'drop'; tools are: answer, describe, query, sample",
    }
    assert refused.refused and not refused.done and episode.steps_used == 0


def test_a_refused_call_names_a_long_tool_short(manager):
    episode = manager.create(seed=1)
    refused = manager.step(episode.episode_id, "x" * 500_000)
    assert refused.tool == "x" * 64 + "..."
    assert len(refused.data["message"]) < 200


def test_idle_episodes_are_reaped_after_the_ttl(spider_catalog):
    clock = FakeClock()
    sessions = EpisodeManager(spider_catalog, Settings(split=DEV, idle_ttl_s=60), clock=clock)
    idle = sessions.create(seed=1)
    busy = sessions.create(seed=2)
    clock.now += 50
    sessions.step(busy.episode_id, "query", {"sql": "SELECT 1"})
    clock.now += 20
    assert sessions.reap() == 1
    with pytest.raises(UnknownEpisodeError, match="expired"):
        sessions.get(idle.episode_id)
    assert sessions.get(busy.episode_id) is busy
    stats = sessions.stats()
    assert (stats.active, stats.reaped, stats.created, stats.steps) == (1, 1, 2, 1)


def test_background_reaper_closes_idle_episodes(spider_catalog):
    sessions = EpisodeManager(spider_catalog, Settings(split=DEV, idle_ttl_s=0.05))
    sessions.start_reaper(interval_s=0.02)
    sessions.create(seed=1)
    done = threading.Event()
    for _ in range(100):
        if sessions.stats().active == 0:
            done.set()
            break
        done.wait(0.02)
    sessions.shutdown()
    assert done.is_set()
    assert sessions.stats().reaped == 1


def test_eight_threads_two_hundred_episodes_each_without_cross_talk(spider_catalog):
    sessions = EpisodeManager(spider_catalog, Settings(split=DEV, max_episodes=64))
    failures: list[str] = []

    def worker(thread: int) -> None:
        for i in range(200):
            seed = thread * 1000 + i
            expected = sessions.choose_question(seed=seed)
            episode = sessions.create(seed=seed)
            marker = f"t{thread}e{i}"
            result = sessions.step(
                episode.episode_id,
                "query",
                {"sql": f"SELECT '{marker}', count(*) FROM sqlite_master"},
            )
            if episode.question.id != expected.id or result.data["rows"][0][0] != marker:
                failures.append(f"{marker}: wrong question or result")
            sessions.step(episode.episode_id, "answer", {"value": "[]"})
            if sessions.get(episode.episode_id).history[0].result is not result:
                failures.append(f"{marker}: history mixed up")
            sessions.close(episode.episode_id)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    stats = sessions.stats()
    assert (stats.active, stats.created, stats.closed, stats.steps) == (0, 1600, 1600, 3200)


def test_a_database_broken_after_loading_fails_clearly_and_alone(tmp_path):
    from env_core.catalog import Catalog
    from env_core.demo import demo_data_dir
    from env_core.errors import DataError

    data_dir = demo_data_dir(tmp_path)
    sessions = EpisodeManager(Catalog.load(data_dir, ["dev"], cache_dir=tmp_path))
    (data_dir / "database" / "farm_shop" / "farm_shop.sqlite").write_bytes(b"corrupted" * 500)
    with pytest.raises(DataError, match="'farm_shop' cannot be opened right now") as raised:
        sessions.create(db_id="farm_shop", seed=1)
    assert str(tmp_path) not in str(raised.value)
    assert sessions.stats().active == 0
    working = sessions.create(db_id="city_library", seed=1)
    assert working.call("query", {"sql": "SELECT count(*) FROM books"}).ok
    sessions.shutdown()


def test_episodes_on_one_database_share_its_connection_until_the_last_ends(spider_catalog):
    manager = EpisodeManager(spider_catalog, Settings(split=DEV, max_episodes=8))
    first = manager.create(db_id="concert_singer", seed=1)
    second = manager.create(db_id="concert_singer", seed=2)
    other = manager.create(db_id="pets_1", seed=1)
    assert first.executor is second.executor
    assert other.executor is not first.executor
    manager.close(first.episode_id)
    assert second.call("sample", {"table": "singer", "n": 1}).ok
    manager.close(second.episode_id)
    reopened = manager.create(db_id="concert_singer", seed=3)
    assert reopened.executor is first.executor  # kept open by the manager
    assert reopened.call("describe", {"table": "stadium"}).ok
    manager.shutdown()
    with pytest.raises(QueryFailedError, match="closed database"):
        first.executor.sample("singer", 1)


# The episode holder every door holds its client's episodes in.
IDLE = "no episode is running: start one"


def test_a_start_replaces_the_episode_and_a_failed_one_ends_nothing(manager):
    held = EpisodeHolder(manager, idle=IDLE)
    first = held.start(question_id=f"{DEV}:1")
    with pytest.raises(UnknownQuestionError):
        held.start(question_id="nowhere:1")
    assert held.episode is first and manager.stats().active == 1
    second = held.start(seed=3)
    assert held.episode is second and manager.stats().active == 1
    replaced = held.call("describe", {"table": "singer"}, first.episode_id)
    assert replaced.refused and replaced.data["error"] == "unknown_episode"
    assert first.steps_used == 0


def test_a_call_with_nothing_held_is_refused_in_the_doors_words(manager):
    held = EpisodeHolder(manager, idle=IDLE)
    refused = held.call("query", {"sql": "SELECT 1"})
    assert refused.refused and refused.text == f"Error: {IDLE}"
    assert held.abandon() == 0.0


def test_episodes_answer_their_holder_only(manager):
    mine, theirs = EpisodeHolder(manager, idle=IDLE), EpisodeHolder(manager, idle=IDLE)
    episode = mine.start(question_id=f"{DEV}:1")
    assert theirs.call("describe", {"table": "singer"}, episode.episode_id).refused
    assert mine.call("describe", {"table": "singer"}).ok


def test_abandon_books_the_wrong_answer_and_ends_the_episode(manager):
    held = EpisodeHolder(manager, idle=IDLE)
    held.start(question_id=f"{DEV}:1")
    held.call("describe", {"table": "singer"})
    total = held.abandon()
    assert held.episode.done and total == held.episode.total_reward
    assert held.call("describe", {"table": "singer"}).data["error"] == "episode_finished"


def test_kept_episodes_are_capped_and_finished_ones_give_their_place(manager):
    held = EpisodeHolder(manager, idle=IDLE, keeps=2, full="two at most")
    first = held.start(seed=1)
    held.start(keep_previous=True, seed=2)
    with pytest.raises(CapacityError, match="two at most"):
        held.start(keep_previous=True, seed=3)
    held.call("answer", {"value": "no idea"}, first.episode_id)
    held.start(keep_previous=True, seed=3)
    assert manager.stats().active == 2
    held.start(seed=4)
    assert manager.stats().active == 1


def test_a_closed_holder_ends_its_episodes_and_refuses_with_the_reason(manager):
    held = EpisodeHolder(manager, idle=IDLE)
    held.start(seed=1, keep_previous=False)
    held.close("the connection is closed")
    assert manager.stats().active == 0 and not held.holding
    with pytest.raises(SessionClosedError, match="the connection is closed"):
        held.start(seed=1)
    assert held.call("query", {"sql": "SELECT 1"}).text == "Error: the connection is closed"


def test_a_dropped_holder_ends_its_episodes(manager):
    for seed in range(16):  # twice the slots: each dropped holder's episode must end
        held = EpisodeHolder(manager, idle=IDLE)
        held.start(seed=seed)
        del held
        gc.collect()
        close_dropped()
    assert manager.stats().active <= 1
