"""The session manager: every door creates, finds and closes its episodes here."""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from env_core.answers import AnswerChecker
from env_core.catalog import Catalog, Question
from env_core.episode import Episode, ToolResult
from env_core.errors import CapacityError, DataError, InvalidArgumentError, UnknownEpisodeError
from env_core.executor import ExecutorLimits, ReadOnlyExecutor
from env_core.rewards import RewardConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionConfig:
    split: str = "dev"
    max_steps: int = 15
    max_sessions: int = 256
    idle_ttl_s: float = 900.0
    rewards: RewardConfig = field(default_factory=RewardConfig)
    limits: ExecutorLimits = field(default_factory=ExecutorLimits)

    def __post_init__(self) -> None:
        if self.max_steps < 1 or self.max_sessions < 1 or self.idle_ttl_s <= 0:
            raise ValueError("max_steps, max_sessions and idle_ttl_s must be positive")


@dataclass(frozen=True)
class SessionStats:
    active: int
    created: int
    closed: int
    reaped: int
    steps: int


class SessionManager:
    """Thread-safe registry of open episodes, with seeded question choice and an idle reaper."""

    def __init__(
        self,
        catalog: Catalog,
        config: SessionConfig | None = None,
        *,
        checker: AnswerChecker | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.catalog = catalog
        self.config = config or SessionConfig()
        self.checker = checker or AnswerChecker()
        self._clock = clock
        self._lock = threading.Lock()
        self._episodes: dict[str, Episode] = {}
        self._rng = random.Random()
        self._counts = {"created": 0, "closed": 0, "reaped": 0, "steps": 0}
        self._reaper: threading.Thread | None = None
        self._stopping = threading.Event()

    def choose_question(
        self,
        *,
        seed: int | None = None,
        question_id: str | None = None,
        db_id: str | None = None,
        split: str | None = None,
    ) -> Question:
        """The question a selector names; the same seed and selector give the same question."""
        if question_id is not None:
            return self.catalog.question(question_id)
        candidates = self.catalog.questions(split or self.config.split, db_id)
        rng = random.Random(seed) if seed is not None else self._rng
        return candidates[rng.randrange(len(candidates))]

    def create(
        self,
        *,
        seed: int | None = None,
        question_id: str | None = None,
        db_id: str | None = None,
        split: str | None = None,
        episode_id: str | None = None,
    ) -> Episode:
        question = self.choose_question(
            seed=seed, question_id=question_id, db_id=db_id, split=split
        )
        self.reap()
        episode_id = episode_id or uuid.uuid4().hex
        with self._lock:
            if episode_id in self._episodes:
                raise InvalidArgumentError(f"episode id {episode_id!r} is already in use")
            if len(self._episodes) >= self.config.max_sessions:
                raise CapacityError(
                    f"all {self.config.max_sessions} episode slots are in use; end an episode "
                    "or retry after idle ones expire"
                )
            executor = self._open_executor(question)
            episode = Episode.open(
                episode_id,
                question,
                executor,
                self.config.rewards,
                self.checker,
                self.config.max_steps,
            )
            episode.last_active = self._clock()
            self._episodes[episode_id] = episode
            self._counts["created"] += 1
        return episode

    def _open_executor(self, question: Question) -> ReadOnlyExecutor:
        path = self.catalog.database_path(question.db_id)
        try:
            return ReadOnlyExecutor(path, self.config.limits)
        except DataError as error:
            # The file changed since the catalog was prepared: say so without server paths.
            log.error("cannot open the database of %s: %s", question.id, error)
            raise DataError(
                f"the database {question.db_id!r} cannot be opened right now; "
                "start an episode on another question or database"
            ) from error

    def get(self, episode_id: str) -> Episode:
        with self._lock:
            episode = self._episodes.get(episode_id)
        if episode is None:
            raise UnknownEpisodeError(
                f"no open episode {episode_id!r}: it was never started, was ended, or expired "
                f"after {self.config.idle_ttl_s:g} s idle; start a new episode"
            )
        return episode

    def step(
        self, episode_id: str, tool: str, arguments: Mapping[str, Any] | None = None
    ) -> ToolResult:
        episode = self.get(episode_id)
        result = episode.call(tool, arguments)
        episode.last_active = self._clock()
        with self._lock:
            self._counts["steps"] += 1
        return result

    def close(self, episode_id: str) -> bool:
        """End an episode and free its connection. False if it was not open."""
        with self._lock:
            episode = self._episodes.pop(episode_id, None)
            if episode is not None:
                self._counts["closed"] += 1
        if episode is None:
            return False
        episode.close()
        return True

    def reap(self) -> int:
        """Close episodes idle for longer than the TTL; returns how many."""
        cutoff = self._clock() - self.config.idle_ttl_s
        with self._lock:
            idle = [e for e in self._episodes.values() if e.last_active < cutoff]
            for episode in idle:
                del self._episodes[episode.episode_id]
            self._counts["reaped"] += len(idle)
        for episode in idle:
            episode.close()
        return len(idle)

    def start_reaper(self, interval_s: float | None = None) -> None:
        """Reap idle episodes in a background thread until `shutdown`."""
        if self._reaper is not None:
            return
        interval = interval_s or max(1.0, self.config.idle_ttl_s / 4)

        def loop() -> None:
            while not self._stopping.wait(interval):
                self.reap()

        self._reaper = threading.Thread(target=loop, name="sqlenv-reaper", daemon=True)
        self._reaper.start()

    def shutdown(self) -> None:
        self._stopping.set()
        if self._reaper is not None:
            self._reaper.join()
        with self._lock:
            episodes = list(self._episodes)
        for episode_id in episodes:
            self.close(episode_id)

    def stats(self) -> SessionStats:
        with self._lock:
            return SessionStats(active=len(self._episodes), **self._counts)
