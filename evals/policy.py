"""What a policy is: something that, given an episode's start, yields tool calls.

A policy plays an episode with `play` (`env_core.calls.Play`): a generator that yields a
`ToolCall`, receives the step's `ToolResult` through `send`, and returns when it stops
(normally after `answer`; returning earlier leaves the episode unanswered).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from env_core.calls import Play, ToolCall
from env_core.catalog import Question
from env_core.episode import EpisodeStart
from env_core.settings import Settings

__all__ = ["EpisodeContext", "Play", "Policy", "ToolCall"]


@dataclass
class EpisodeContext:
    """What a policy may use for one episode.

    `question` carries the gold SQL: only the oracle reads it (an assessed agent is not given
    it: None). `rng` is seeded from the run's
    seed and the episode's index, so an episode plays the same whatever runs before it.
    `notes` counts policy-side events for the record, such as malformed tool calls.
    `max_rows` is the most rows a query shows in this episode (the door's `--max-rows`).
    """

    start: EpisodeStart
    question: Question | None
    rng: random.Random
    notes: Counter[str] = field(default_factory=Counter)
    max_rows: int = Settings.max_rows


class Policy(Protocol):
    name: str

    def play(self, context: EpisodeContext) -> Play: ...
