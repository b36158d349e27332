"""The episode manager: every door creates, finds and closes its episodes here."""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from env_core.answers import AnswerChecker
from env_core.catalog import Catalog, Question
from env_core.episode import Episode, ToolResult, refusal
from env_core.errors import (
    CapacityError,
    DataError,
    EpisodeError,
    InvalidArgumentError,
    UnknownEpisodeError,
    shown,
)
from env_core.executor import ReadOnlyExecutor
from env_core.executor_limits import ExecutorLimits
from env_core.mixed_catalog import MixedCatalog, select_questions
from env_core.rewards import PROFILES, RewardConfig
from env_core.sandbox import Sandbox, Work, finish
from env_core.settings import Settings
from env_core.tools import ToolSpec, check_text, tools_for

log = logging.getLogger(__name__)


def executor_limits(settings: Settings) -> ExecutorLimits:
    """The SQL limits the settings set (the others are the executor's own)."""
    return ExecutorLimits(timeout_s=settings.query_timeout_s, max_rows=settings.max_rows)


@dataclass(frozen=True)
class EpisodeStats:
    active: int
    created: int
    closed: int
    reaped: int
    steps: int


# The options that name a question, as `EpisodeManager.choose_question` takes them.
SELECTORS = ("seed", "question_id", "db_id", "split", "dataset")


class EpisodeManager:
    """Thread-safe registry of open episodes, with seeded question choice and an idle reaper."""

    def __init__(
        self,
        catalog: Catalog | MixedCatalog,
        settings: Settings | None = None,
        *,
        rewards: RewardConfig | None = None,
        limits: ExecutorLimits | None = None,
        checker: AnswerChecker | None = None,
        clock: Callable[[], float] = time.monotonic,
        sandbox: Sandbox | None = None,
    ) -> None:
        """Episodes under `settings` (default: the defaults). `rewards` and `limits` replace
        what the settings' reward profile and SQL limits give (a reward architecture of
        one's own, tighter limits). `sandbox`: SQL workers shared with other managers (closed
        by whoever made it), instead of this manager's own."""
        self.catalog = catalog
        self.settings = settings or Settings()
        self.rewards = rewards or RewardConfig.profile(self.settings.reward_profile)
        self.limits = limits or executor_limits(self.settings)
        self.checker = checker or AnswerChecker()
        self._clock = clock
        self._lock = threading.Lock()
        # An episode is registered under its id, scoped to its owner when the client chose the
        # id: one client's choice neither collides with nor reveals another's episode.
        self._episodes: dict[tuple[str | None, str], Episode] = {}
        self._clients: Counter[str] = Counter()
        self._rng = random.Random()
        self._counts = {"created": 0, "closed": 0, "reaped": 0, "steps": 0}
        self._reaper: threading.Thread | None = None
        self._stopping = threading.Event()
        self._owns_sandbox = sandbox is None
        self.sandbox = sandbox or Sandbox(
            self.settings.sql_workers,
            self.settings.sql_memory_mb,
            databases=self._most_asked_databases(),
            limits=self.limits,
        )
        # One read-only connection per database, shared by its episodes (see `_open_executor`).
        self._executors: dict[Path, ReadOnlyExecutor] = {}

    def _most_asked_databases(self) -> list[Path]:
        """The served split's databases, those with the most questions first."""
        split = self.catalog.splits.get(self.settings.split)
        asked = Counter(question.db_id for question in split.questions) if split else Counter()
        return [self.catalog.database_path(db_id) for db_id, _ in asked.most_common()]

    def served(self) -> dict[str, Any]:
        """What the manager serves, for a client to check it evaluates the same episodes: the
        split, its question count and fingerprint (`Split.fingerprint`), the step budget and
        the reward profile ("custom" for rewards that are none of the named profiles)."""
        split = self.catalog.splits[self.settings.split]
        profiles = (name for name, rewards in PROFILES.items() if rewards == self.rewards)
        return {
            "split": split.name,
            "questions": len(split.questions),
            "fingerprint": split.fingerprint,
            "max_steps": self.settings.max_steps,
            "reward_profile": next(profiles, "custom"),
        }

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """The tools as this manager's agents read them: with its row limits."""
        return tools_for(self.limits)

    def choose_question(
        self,
        *,
        seed: int | None = None,
        question_id: str | None = None,
        db_id: str | None = None,
        split: str | None = None,
        dataset: str | None = None,
    ) -> Question:
        """The question a selector names; the same seed and selector give the same question."""
        selectors = {"question_id": question_id, "db_id": db_id, "split": split, "dataset": dataset}
        _check_selectors(seed, selectors)
        if question_id is not None:
            return self.catalog.question(question_id)
        candidates = select_questions(self.catalog, split or self.settings.split, db_id, dataset)
        rng = random.Random(seed) if seed is not None else self._rng
        return candidates[rng.randrange(len(candidates))]

    def create(
        self,
        *,
        episode_id: str | None = None,
        owner: str | None = None,
        client: str | None = None,
        replacing: Sequence[Episode] = (),
        **selectors: Any,
    ) -> Episode:
        """Open an episode on the question `selectors` name (see `choose_question`). `owner`
        names the session that may act on it (any, if None); `client` the remote party
        whose open episodes are capped together. The episodes `replacing` (a door's running
        ones) are closed once the new one is open, their slots counted as free: if this
        raises, they run on as they were."""
        _check_selectors(None, {"episode_id": episode_id})
        question = self.choose_question(**selectors)
        self.reap()
        key = (owner, episode_id) if episode_id else (None, uuid.uuid4().hex)
        episode_id = key[1]
        with self._lock:
            replaced = [e for e in replacing if self._episodes.get(e.key) is e]
            freed = {e.key for e in replaced}
            if key in self._episodes and key not in freed:
                raise InvalidArgumentError(f"episode id {shown(episode_id)} is already in use")
            if len(self._episodes) - len(replaced) >= self.settings.max_episodes:
                raise CapacityError(
                    f"all {self.settings.max_episodes} episode slots are in use; end an episode "
                    "or retry after idle ones expire"
                )
            limit = self.settings.max_episodes_per_client
            held = self._clients[client] - sum(e.client == client for e in replaced)
            if client is not None and held >= limit:
                raise CapacityError(
                    f"you have {limit} episodes open, as many as one client may; "
                    "end one of them before starting another"
                )
            executor = self._open_executor(question)
            episode = Episode.open(
                episode_id,
                question,
                executor,
                self.rewards,
                self.checker,
                self.settings.max_steps,
                self.catalog.column_notes(question.db_id),
            )
            episode.owner = owner
            episode.client = client
            episode.key = key
            if client is not None:
                self._clients[client] += 1
            episode.last_active = self._clock()
            for old in replaced:
                self._forget(old)
            self._counts["closed"] += len(replaced)
            self._episodes[key] = episode
            self._counts["created"] += 1
        for old in replaced:
            old.close()
        return episode

    def _open_executor(self, question: Question) -> ReadOnlyExecutor:
        """The database's shared executor, opened on first use and kept until `shutdown`
        (the caller holds the lock). A connection costs ~110 KiB and an open ~0.3 ms: sharing
        makes an episode's memory and reset independent of its database, and bounds the
        connections by the catalog's databases rather than by the episodes open. Calls on it
        are serialised by its lock; those run in process are short by construction."""
        path = self.catalog.database_path(question.db_id)
        executor = self._executors.get(path)
        if executor is not None:
            return executor.share()
        try:
            executor = ReadOnlyExecutor(path, self.limits, sandbox=self.sandbox)
        except DataError as error:
            # The file changed since the catalog was prepared: say so without server paths.
            log.error("cannot open the database of %s: %s", question.id, error)
            raise DataError(
                f"the database {question.db_id!r} cannot be opened right now; "
                "start an episode on another question or database"
            ) from error
        self._executors[path] = executor  # the manager's own use, released by `shutdown`
        return executor.share()

    def get(self, episode_id: str, owner: str | None = None) -> Episode:
        """The open episode, if `owner` may act on it; another's is reported as unknown."""
        with self._lock:
            episode = self._find(episode_id, owner)
        if episode is None:
            raise UnknownEpisodeError(
                f"no open episode {shown(episode_id)}: it was never started here, was ended, "
                f"or expired after {self.settings.idle_ttl_s:g} s idle; start a new episode"
            )
        return episode

    def _find(self, episode_id: str, owner: str | None) -> Episode | None:
        """The open episode `owner` may act on by this id; the caller holds the lock."""
        episode = self._episodes.get((owner, episode_id)) or self._episodes.get((None, episode_id))
        if episode is None or not self._may_use(episode, owner):
            return None
        return episode

    def is_open(self, episode: Episode) -> bool:
        """Whether the episode is still registered (not closed, nor reaped)."""
        with self._lock:
            return self._episodes.get(episode.key) is episode

    def _may_use(self, episode: Episode, owner: str | None) -> bool:
        return episode.owner in (None, owner) or self.settings.route_by_episode_id

    def step(
        self,
        episode_id: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        owner: str | None = None,
    ) -> ToolResult:
        return finish(self.work(episode_id, tool, arguments, owner))

    def work(
        self,
        episode_id: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        owner: str | None = None,
    ) -> Work[ToolResult]:
        """A step as work for `finish` / `finish_async` (see `env_core.sandbox`). A call the
        episode cannot take (unknown or finished episode, unknown tool) returns the engine's
        `refusal`, as every door shows it."""
        try:
            episode = self.get(episode_id, owner)
            result = yield from episode.work(tool, arguments)
        except EpisodeError as error:
            return refusal(tool, error)
        episode.last_active = self._clock()
        if not result.refused:  # else an abandon() overtook it (see `Episode.work`)
            with self._lock:
                self._counts["steps"] += 1
        return result

    def close(self, episode_id: str, owner: str | None = None) -> bool:
        """End an episode and free its connection. False if it was not open (to `owner`)."""
        with self._lock:
            episode = self._find(episode_id, owner)
            if episode is None:
                return False
            self._forget(episode)
            self._counts["closed"] += 1
        episode.close()
        return True

    def _forget(self, episode: Episode) -> None:
        """Drop an episode from the registry; the caller holds the lock."""
        del self._episodes[episode.key]
        if episode.client is not None:
            self._clients[episode.client] -= 1
            if not self._clients[episode.client]:
                del self._clients[episode.client]

    def reap(self) -> int:
        """Close episodes idle for longer than the TTL; returns how many."""
        cutoff = self._clock() - self.settings.idle_ttl_s
        return self._end(lambda episode: episode.last_active < cutoff, "reaped")

    def _end(self, chosen: Callable[[Episode], bool], counter: str) -> int:
        """Close the chosen episodes, whoever owns them, counted under `counter`."""
        with self._lock:
            ended = [episode for episode in self._episodes.values() if chosen(episode)]
            for episode in ended:
                self._forget(episode)
            self._counts[counter] += len(ended)
        for episode in ended:
            episode.close()
        return len(ended)

    def start_reaper(self, interval_s: float | None = None) -> None:
        """Reap idle episodes in a background thread until `shutdown`."""
        if self._reaper is not None:
            return
        interval = interval_s or max(1.0, self.settings.idle_ttl_s / 4)

        def loop() -> None:
            while not self._stopping.wait(interval):
                self.reap()

        self._reaper = threading.Thread(target=loop, name="sqlenv-reaper", daemon=True)
        self._reaper.start()

    def shutdown(self) -> None:
        self._stopping.set()
        if self._reaper is not None:
            self._reaper.join()
        self._end(lambda _episode: True, "closed")
        with self._lock:
            executors, self._executors = list(self._executors.values()), {}
        for executor in executors:
            executor.close()
        if self._owns_sandbox:
            self.sandbox.close()

    def stats(self) -> EpisodeStats:
        with self._lock:
            return EpisodeStats(active=len(self._episodes), **self._counts)


MAX_SELECTOR_CHARS = 200


def _check_selectors(seed: object, texts: dict[str, object]) -> None:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise InvalidArgumentError(f"seed must be a whole number, 0 or more, not {shown(seed)}")
    for name, value in texts.items():
        if value is not None and (not isinstance(value, str) or len(value) > MAX_SELECTOR_CHARS):
            raise InvalidArgumentError(
                f"{name} must be a short string (at most {MAX_SELECTOR_CHARS} characters), "
                f"not {shown(value)}"
            )
        if value is not None:
            check_text(name, value)
