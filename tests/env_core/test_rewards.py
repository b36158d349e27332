import itertools
import random

import pytest

from env_core.rewards import PROFILES, RewardConfig, RewardTracker

TOOLS = ("describe", "sample", "query")


def random_episode(tracker: RewardTracker, rng: random.Random, steps: int) -> float:
    total = 0.0
    for _ in range(steps):
        tool = rng.choice(TOOLS)
        table = rng.choice("abcdefg")
        total += tracker.step(tool, f"{tool}:{table}", rng.random() < 0.7, table)
    return total


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_shaping_stays_within_its_bounds(name):
    config = RewardConfig.profile(name)
    rng = random.Random(7)
    for _ in range(500):
        tracker = RewardTracker(config)
        shaping = random_episode(tracker, rng, rng.randint(1, 30))
        assert abs(shaping) <= config.max_episode_shaping + 1e-9
        assert abs(tracker.shaping_total - shaping) < 1e-9


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_a_wrong_answer_never_outscores_a_right_one(name):
    config = RewardConfig.profile(name)
    rng = random.Random(11)
    worst_right, best_wrong = float("inf"), float("-inf")
    for correct, _ in itertools.product((True, False), range(300)):
        tracker = RewardTracker(config)
        total = random_episode(tracker, rng, rng.randint(0, 14)) + tracker.terminal(correct)
        if correct:
            worst_right = min(worst_right, total)
        else:
            best_wrong = max(best_wrong, total)
    assert worst_right > best_wrong


def test_each_step_is_bounded():
    config = RewardConfig(new_table_bonus=0.5, max_step_shaping=0.05, max_episode_shaping=0.2)
    tracker = RewardTracker(config)
    assert tracker.step("describe", "a", True, "a") == pytest.approx(0.05)


def test_exploration_and_penalties():
    tracker = RewardTracker(RewardConfig())
    assert tracker.step("describe", "t1", True, "t1") == pytest.approx(0.02 - 0.01)
    assert tracker.step("describe", "t1", True, "t1") == pytest.approx(-0.01 - 0.02)
    assert tracker.step("query", "q", True) == pytest.approx(0.03 - 0.01)
    assert tracker.step("query", "q2", True) == pytest.approx(-0.01)
    assert tracker.step("query", "bad", False) == pytest.approx(-0.02)


def test_potential_profile_refunds_exploration_at_the_end():
    tracker = RewardTracker(RewardConfig.profile("potential"))
    gained = sum(tracker.step("describe", t, True, t) for t in "abc") + tracker.step(
        "query", "q", True
    )
    assert gained == pytest.approx(0.09)
    assert tracker.terminal(correct=True) == pytest.approx(1.0 - 0.09)


def test_sparse_profile_is_terminal_only():
    tracker = RewardTracker(RewardConfig.profile("sparse"))
    assert random_episode(tracker, random.Random(1), 20) == 0.0
    assert tracker.terminal(True) == 1.0 and tracker.terminal(False) == 0.0


def test_configs_that_let_wrong_beat_right_are_refused():
    with pytest.raises(ValueError, match="wrong answer could outscore"):
        RewardConfig(max_episode_shaping=0.6)
    with pytest.raises(ValueError, match="unknown reward profile"):
        RewardConfig.profile("dense")
