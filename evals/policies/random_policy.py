"""A random agent: valid tool calls with arguments drawn from what it has seen so far.

It knows the table names from the start, learns column names from `describe`, and collects the
cells every result shows; it answers with a random seen cell, row or column, sooner the fewer
steps are left, and always on its last step.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from env_core.episode import ToolResult
from env_core.read_only import quote_identifier
from env_core.tools import EXPLORING
from evals.policy import EpisodeContext, Play, ToolCall


@dataclass
class Sightings:
    """What the agent has observed in one episode."""

    tables: list[str]
    columns: dict[str, list[str]] = field(default_factory=dict)
    results: list[list[list[Any]]] = field(default_factory=list)

    def learn(self, call: ToolCall, result: ToolResult) -> None:
        if not result.ok:
            return
        if call.tool == "describe":
            names = [column["name"] for column in result.data.get("columns", [])]
            self.columns[call.arguments["table"]] = names
        elif call.tool in ("sample", "query") and result.data.get("rows"):
            self.results.append(result.data["rows"])
            if call.tool == "sample":
                self.columns.setdefault(call.arguments["table"], result.data["columns"])


class RandomPolicy:
    name = "random"

    def __init__(self, answer_probability: float = 0.2) -> None:
        self.answer_probability = answer_probability

    def play(self, context: EpisodeContext) -> Play:
        rng = context.rng
        seen = Sightings(list(context.start.tables))
        for steps_left in range(context.start.budget, 0, -1):
            if steps_left == 1 or rng.random() < self.answer_probability:
                yield ToolCall("answer", {"value": random_answer(rng, seen.results)})
                return
            call = random_exploration(rng, seen)
            seen.learn(call, (yield call))


def random_exploration(rng: random.Random, seen: Sightings) -> ToolCall:
    """A tool that explores, drawn from the tool table, with arguments for the table drawn."""
    table = rng.choice(seen.tables)
    spec = rng.choice(EXPLORING)
    properties = spec.parameters["properties"].items()
    arguments = {
        name: random_argument(rng, name, schema, table, seen) for name, schema in properties
    }
    return ToolCall(spec.name, arguments)


def random_argument(
    rng: random.Random, name: str, schema: dict[str, Any], table: str, seen: Sightings
) -> Any:
    """A value for a tool's parameter: the table, a SELECT on it, or a whole number from the
    least allowed to the default."""
    if name == "table":
        return table
    if name == "sql":
        return random_select(rng, table, seen.columns.get(table, []))
    if schema["type"] == "integer":
        return rng.randint(schema["minimum"], schema["default"])
    raise ValueError(f"the random policy has no value for a parameter named {name!r}")


def random_select(rng: random.Random, table: str, columns: Sequence[str]) -> str:
    source = quote_identifier(table)
    if not columns:
        return f"SELECT count(*) FROM {source}"
    column = quote_identifier(rng.choice(columns))
    return rng.choice(
        (
            f"SELECT count(*) FROM {source}",
            f"SELECT {column} FROM {source} LIMIT {rng.randint(1, 10)}",
            f"SELECT DISTINCT {column} FROM {source}",
            f"SELECT {column}, count(*) FROM {source} GROUP BY {column}",
            f"SELECT max({column}), min({column}) FROM {source}",
        )
    )


def random_answer(rng: random.Random, results: list[list[list[Any]]]) -> str:
    if not results:
        return json.dumps(rng.randint(0, 10))
    rows = rng.choice(results)
    shape = rng.choice(("cell", "row", "column", "rows"))
    if shape == "cell":
        return json.dumps(rng.choice(rng.choice(rows)))
    if shape == "row":
        return json.dumps([rng.choice(rows)])
    if shape == "column":
        index = rng.randrange(len(rows[0]))
        return json.dumps([row[index] for row in rows])
    return json.dumps(rows)
