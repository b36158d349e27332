"""The fixed episodes the conformance suite replays through every door.

A script is a question id and a fixed list of tool calls. Oracle and Random scripts are the
calls those policies made through the engine in process; the edge cases are written here:
agent mistakes, malformed arguments, running out of steps and calls after the end.
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
