"""`sqlenv audit-reward`: every profile passes the audit on the demo and on Spider dev, the table
shows each strategy, skill level and the GRPO signal, and a profile that pays for exploring more
than for answering fails it."""

from __future__ import annotations

import re

import pytest

from env_core.cli import main
from env_core.rewards import PROFILES, RewardConfig
from env_core.settings import Settings
from evals.reward_audit import BEHAVIOURS, SKILL_LEVELS, audit


def run(capsys, *arguments: str) -> tuple[int, str]:
    code = main(["audit-reward", *arguments])
    return code, capsys.readouterr().out


def sections(output: str) -> dict[str, str]:
    """Each profile's part of the table, by profile name."""
    parts = re.split(r"\n\nprofile ", output)
    return {part.split(":", 1)[0]: part for part in parts[1:]}


def test_every_profile_passes_on_the_demo_and_the_table_shows_it(capsys):
    code, output = run(capsys)
    assert code == 0
    assert output.startswith("reward audit: 58 questions of split dev, budget 15 steps, seed 0")
    profiles = sections(output)
    assert list(profiles) == list(PROFILES)
    for name, table in profiles.items():
        for behaviour in BEHAVIOURS:
            assert re.search(rf"\n  {behaviour} +\d+/58 ", table), (name, behaviour)
        assert re.search(r"\n  oracle +58/58 ", table)
        skill_rows = re.findall(r"\n  (\d\.\d) +[+-]\d\.\d{3} +\[", table)
        assert skill_rows == [f"{skill:.1f}" for skill in SKILL_LEVELS]
        assert "correctness dominates: holds" in table
        assert "rises strictly with skill: yes" in table
        assert "verdict: pass" in table
    # Shaping is what gives GRPO a signal in a group where every rollout failed.
    failed_groups = r"where every rollout failed: (\d+)/(\d+)"
    shaped = re.search(failed_groups, profiles["shaped"]).groups()
    sparse = re.search(failed_groups, profiles["sparse"]).groups()
    assert shaped[0] == shaped[1] != "0" and sparse[0] == "0"
    # The same seed gives the same table.
    assert run(capsys) == (0, output)


def test_every_profile_passes_on_spider_dev(capsys, spider_dir):
    code, output = run(
        capsys,
        *("--data-dir", str(spider_dir), "--split", "dev_without_wta_1"),
        *("--questions", "60", "--seed", "3"),
    )
    assert code == 0, output
    assert output.count("verdict: pass") == len(PROFILES)
    assert "60 questions of split dev_without_wta_1" in output


class Unchecked(RewardConfig):
    """A reward configuration the constructor's bound check would refuse."""

    def __post_init__(self) -> None:
        pass


EXPLORATION_PAYS = Unchecked(
    new_table_bonus=0.5, max_step_shaping=1.0, max_episode_shaping=2.0, step_cost=0.0
)


def test_a_profile_that_pays_for_exploring_more_than_answering_fails(capsys, monkeypatch):
    [result] = audit(Settings(), {"exploring": EXPLORATION_PAYS}, limit=20)
    assert not result.correctness_dominates and not result.passed
    monkeypatch.setitem(PROFILES, "exploring", EXPLORATION_PAYS)
    code, output = run(capsys, "--profiles", "shaped,exploring", "--questions", "20")
    assert code == 1
    assert list(sections(output)) == ["shaped", "exploring"]
    assert "correctness dominates: FAILS" in sections(output)["exploring"]
    assert "verdict: FAIL" in sections(output)["exploring"]


def test_a_profile_where_a_wrong_answer_pays_more_than_a_right_one_fails():
    [result] = audit(Settings(), {"upside down": Unchecked(correct=-1.0)}, limit=20)
    assert not result.rises_with_skill and not result.passed


def test_an_unknown_profile_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["audit-reward", "--profiles", "shaped,generous"])
    assert exit.value.code == 2
    assert "unknown reward profile generous; choose from shaped, potential, sparse" in (
        capsys.readouterr().err
    )
