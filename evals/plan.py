"""Which question each episode of a run asks, fixed by the seed before anything is played."""

from __future__ import annotations

import random
from dataclasses import dataclass

from env_core.catalog import Question


@dataclass(frozen=True)
class EpisodeTask:
    index: int
    question_id: str

    def rng(self, seed: int) -> random.Random:
        # A string seed is hashed with SHA-512 by `random`, independent of PYTHONHASHSEED.
        return random.Random(f"{seed}:{self.index}")


def plan_episodes(questions: tuple[Question, ...], n_episodes: int, seed: int) -> list[EpisodeTask]:
    """Shuffled passes over the questions: with n equal to their number, each is asked once."""
    if n_episodes < 1:
        raise ValueError("n_episodes must be at least 1")
    rng = random.Random(seed)
    order: list[str] = []
    while len(order) < n_episodes:
        ids = [question.id for question in questions]
        rng.shuffle(ids)
        order.extend(ids)
    return [EpisodeTask(index, question_id) for index, question_id in enumerate(order[:n_episodes])]
