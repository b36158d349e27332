"""Summary statistics of a run: success with a Wilson interval, rewards, steps, tool use."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import mean
from typing import Any

from env_core.layouts import SPIDER_HARDNESS, in_difficulty_order
from evals.play import EpisodeRecord

HARDNESS_LEVELS = SPIDER_HARDNESS
Z_95 = 1.959963984540054


@dataclass(frozen=True)
class Proportion:
    successes: int
    n: int
    rate: float
    low: float
    high: float


def wilson_interval(successes: int, n: int, z: float = Z_95) -> Proportion:
    """The Wilson score interval, which stays inside [0, 1] and is sound at 0% and 100%."""
    if not 0 <= successes <= n:
        raise ValueError("need 0 <= successes <= n")
    if n == 0:
        return Proportion(0, 0, 0.0, 0.0, 1.0)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # At 0% and 100% the bound is exactly 0 or 1; rounding would leave 0.99999...
    low = 0.0 if successes == 0 else centre - half
    high = 1.0 if successes == n else centre + half
    return Proportion(successes, n, p, low, high)


@dataclass(frozen=True)
class GroupSummary:
    episodes: int
    success: Proportion
    avg_reward: float
    avg_steps: float
    # The dataset's official metric (`evals.official`), where it has one of another kind.
    official: Proportion | None = None

    @classmethod
    def of(cls, records: Sequence[EpisodeRecord]) -> GroupSummary:
        judged = [r.official for r in records if r.official is not None]
        return cls(
            episodes=len(records),
            success=wilson_interval(sum(r.correct for r in records), len(records)),
            avg_reward=round(mean(r.total_reward for r in records), 6) if records else 0.0,
            avg_steps=round(mean(r.steps_used for r in records), 6) if records else 0.0,
            official=wilson_interval(sum(judged), len(judged)) if judged else None,
        )


@dataclass(frozen=True)
class Summary:
    overall: GroupSummary
    by_hardness: dict[str, GroupSummary]
    answered: int
    tool_use: dict[str, int]
    errors: dict[str, int]
    notes: dict[str, int]
    # Each dataset's episodes ("all") and its difficulty labels, for a run over several.
    by_dataset: dict[str, dict[str, GroupSummary]]

    @classmethod
    def of(cls, records: Sequence[EpisodeRecord]) -> Summary:
        steps = [step for record in records for step in record.steps]
        notes: Counter[str] = Counter()
        for record in records:
            notes.update(record.notes)
        return cls(
            overall=GroupSummary.of(records),
            by_hardness=_by_label(records),
            answered=sum(r.answered for r in records),
            tool_use=dict(sorted(Counter(step.tool for step in steps).items())),
            errors=dict(sorted(Counter(s.error for s in steps if s.error).items())),
            notes=dict(sorted(notes.items())),
            by_dataset={
                dataset: {"all": GroupSummary.of(part), **_by_label(part)}
                for dataset, part in _by_dataset(records).items()
            },
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _by_label(records: Sequence[EpisodeRecord]) -> dict[str, GroupSummary]:
    return {
        level: GroupSummary.of([r for r in records if r.hardness == level])
        for level in _levels(records)
    }


def _by_dataset(records: Sequence[EpisodeRecord]) -> dict[str, list[EpisodeRecord]]:
    datasets: dict[str, list[EpisodeRecord]] = {}
    for record in records:
        datasets.setdefault(record.dataset, []).append(record)
    return dict(sorted(datasets.items()))


def _levels(records: Sequence[EpisodeRecord]) -> list[str]:
    """Spider's hardness levels, then every other difficulty label the records carry."""
    others = {r.hardness for r in records} - set(HARDNESS_LEVELS)
    return [*HARDNESS_LEVELS, *in_difficulty_order(others)]
