"""The episode holder every door holds its client's episodes in, on Spider dev."""

import gc

import pytest

from env_core.errors import CapacityError, SessionClosedError, UnknownQuestionError
from env_core.holder import EpisodeHolder, close_dropped
from env_core.manager import EpisodeManager
from env_core.settings import Settings

DEV = "dev_without_wta_1"
IDLE = "no episode is running: start one"


@pytest.fixture
def manager(spider_catalog):
    manager = EpisodeManager(spider_catalog, Settings(split=DEV, max_episodes=4))
    yield manager
    manager.shutdown()


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
    for seed in range(8):  # twice the slots: each dropped holder's episode must end
        held = EpisodeHolder(manager, idle=IDLE)
        held.start(seed=seed)
        del held
        gc.collect()
        close_dropped()
    assert manager.stats().active <= 1
