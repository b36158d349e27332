"""SQLEnvTRL's episodes: a reset naming no question leaves the running one, resets racing on one
instance leave it one episode open, and an instance that is dropped and garbage-collected ends
its own, by the time another instance resets."""

from __future__ import annotations

import gc
import threading
import time
import weakref

import pytest

from doors.trl import SQLEnvTRL
from env_core.errors import SQLEnvError
from env_core.manager import EpisodeManager
from env_core.settings import Settings

SPIDER_DEV = "dev_without_wta_1"


@pytest.fixture
def small_manager(spider_catalog):
    manager = EpisodeManager(spider_catalog, Settings(split=SPIDER_DEV, max_episodes=8))
    yield manager
    manager.shutdown()


@pytest.mark.parametrize(
    "options",
    [
        {"question_id": f"{SPIDER_DEV}:99999"},
        {"split": "no_such_split"},
        {"db_id": "no_such_database"},
        {"seed": -1},
    ],
)
def test_a_reset_naming_no_question_raises_and_the_episode_goes_on(spider_manager, options):
    environment = SQLEnvTRL(spider_manager)
    environment.reset(question_id=f"{SPIDER_DEV}:0")
    environment.describe("singer")
    with pytest.raises(SQLEnvError):
        environment.reset(**options)
    assert environment.query("SELECT count(*) FROM singer").startswith("count(*)\n6")
    assert environment.episode.question.id == f"{SPIDER_DEV}:0"
    assert environment.episode.steps_used == 2


def test_resets_racing_on_one_instance_leave_one_episode_open(spider_manager):
    environment = SQLEnvTRL(spider_manager)
    start = threading.Barrier(8)
    failures = []

    def reset_in_turn() -> None:
        start.wait()
        try:
            for _ in range(50):
                environment.reset()
        except Exception as error:  # reported below, not lost in the thread
            failures.append(error)

    threads = [threading.Thread(target=reset_in_turn) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert spider_manager.stats().active == 1, "8 threads x 50 resets"
    assert spider_manager.get(environment.episode.episode_id) is environment.episode


def test_dropped_instances_end_their_episodes(small_manager):
    for _round in range(3):  # 24 instances, through 8 episode slots
        environments = [SQLEnvTRL(small_manager) for _ in range(8)]
        for environment in environments:
            environment.reset()
        environments[0].itself = environments[0]  # one the cycle collector has to find
        dropped = [weakref.ref(environment) for environment in environments]
        del environments, environment
        gc.collect()
        assert [reference() for reference in dropped] == [None] * 8
        wait_for_no_episodes(small_manager)


def test_instances_made_and_dropped_in_turn_never_find_the_slots_held(spider_catalog):
    """A trainer may make and drop instances faster than the closing thread runs: a reset
    that found both slots held would raise `CapacityError`."""
    manager = EpisodeManager(spider_catalog, Settings(split=SPIDER_DEV, max_episodes=2))
    try:
        for _ in range(300):
            environment = SQLEnvTRL(manager)
            environment.reset()
            del environment
        assert manager.stats().created == 300
    finally:
        manager.shutdown()


def wait_for_no_episodes(manager: EpisodeManager) -> None:
    deadline = time.monotonic() + 10
    while manager.stats().active:
        assert time.monotonic() < deadline, f"{manager.stats().active} episodes left open"
        time.sleep(0.01)
