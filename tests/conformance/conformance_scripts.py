"""The fixed episodes the conformance suite replays through every door.

A script is a question id and a fixed list of tool calls. Oracle and Random scripts are the
calls those policies made through the engine in process; the edge cases are written here:
agent mistakes, malformed arguments, running out of steps and calls after the end. A replay's
outcomes are compared with the engine's in process as `differences` says.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from env_core.catalog import Catalog
from evals.door_clients import DoorClient
from evals.evaluate import evaluate
from evals.policies import OraclePolicy, RandomPolicy


@dataclass(frozen=True)
class Script:
    name: str
    question_id: str
    calls: tuple[tuple[str, dict[str, Any]], ...]


def recorded(door: DoorClient, policy, episodes: int, seed: int) -> list[Script]:
    result = evaluate(door, policy, episodes, seed)
    return [
        Script(
            f"{policy.name}-{record.index}",
            record.question_id,
            tuple((step.tool, step.arguments) for step in record.steps),
        )
        for record in result.records
    ]


def edge_cases(catalog: Catalog, split: str, count: int, budget: int, seed: int) -> list[Script]:
    rng = random.Random(seed)
    questions = rng.sample(catalog.questions(split), count)
    kinds = [mistakes, malformed, out_of_steps, after_the_end]
    return [
        Script(f"edge-{index}-{kinds[index % 4].__name__}", q.id, kinds[index % 4](q, budget))
        for index, q in enumerate(questions)
    ]


def mistakes(question, _budget):
    return (
        ("describe", {"table": "no_such_table"}),
        ("query", {"sql": "SELEC 1"}),
        ("query", {"sql": "DELETE FROM sqlite_master"}),
        ("query", {"sql": "SELECT 1; SELECT 2"}),
        ("query", {"sql": "SELECT no_such_column FROM sqlite_master"}),
        ("describe", {"table": "no_such_table"}),
        ("answer", {"value": "[]"}),
    )


def malformed(question, _budget):
    return (
        ("sample", {"table": "no_such_table", "n": 0}),
        ("sample", {"table": "no_such_table", "n": 50}),
        ("describe", {"name": "no_such_table"}),
        ("query", {}),
        ("describe", {"table": ""}),
        ("query", {"sql": ""}),
        ("query", {"sql": "SELECT 1" + " " * 9000}),
        ("answer", {"value": "x" * 20_001}),
        ("answer", {"value": "not the answer"}),
    )


def out_of_steps(question, budget):
    return tuple(("query", {"sql": f"SELECT {i}"}) for i in range(budget + 1))


def after_the_end(question, _budget):
    return (
        ("query", {"sql": "SELECT 1"}),
        ("answer", {"value": "42"}),
        ("query", {"sql": "SELECT 2"}),
        ("answer", {"value": question.sql}),
    )


def all_scripts(door: DoorClient, split: str, budget: int) -> list[Script]:
    """300 scripts: 100 Oracle, 150 Random and 50 edge cases."""
    return [
        *recorded(door, OraclePolicy(), 100, seed=1),
        *recorded(door, RandomPolicy(), 150, seed=2),
        *edge_cases(door.catalog, split, 50, budget, seed=3),
    ]


@dataclass(frozen=True)
class Outcome:
    text: str
    reward: float
    done: bool
    data: Any


def masked(text: str, episode_id: str) -> str:
    return text.replace(episode_id, "<episode>")


def comparable_data(data: dict, episode_id: str) -> dict:
    """The structured result less the measured query time, with the episode id masked."""
    return {
        key: masked(value, episode_id) if isinstance(value, str) else value
        for key, value in data.items()
        if key != "elapsed_ms"
    }


def replay_door(door: DoorClient, scripts: list[Script]) -> list[list[Outcome]]:
    episodes = []
    for script in scripts:
        start = door.start(script.question_id)
        outcomes = [Outcome(start.text, 0.0, False, None)]
        for tool, arguments in script.calls:
            result = door.step(start.episode_id, tool, arguments)
            text = masked(result.text, start.episode_id)
            data = comparable_data(result.data, start.episode_id)
            outcomes.append(Outcome(text, result.reward, result.done, data))
        door.end(start.episode_id)
        episodes.append(outcomes)
    return episodes


def differences(reference: list[list[Outcome]], other: list[list[Outcome]], scripts, compare_data):
    found = []
    for script, expected_episode, episode in zip(scripts, reference, other, strict=True):
        for index, (expected, got) in enumerate(zip(expected_episode, episode, strict=True)):
            same = (expected.text, expected.reward, expected.done) == (
                got.text,
                got.reward,
                got.done,
            )
            if compare_data and expected.data != got.data:
                same = False
            if not same:
                found.append(f"{script.name} call {index}: {expected} != {got}")
    return found
