"""The episodes a client holds, under one set of rules for every door.

A door (an OpenEnv session, an MCP connection, a TRL rollout) holds its client's current episode
in an `EpisodeHolder`, with the few earlier ones a client may keep (MCP's keep_previous):

- `start` replaces what is held. The new episode is opened before the old ones end, so a start
  that fails (options that name no question, no free slot, a database that cannot be opened)
  ends nothing; two starts racing on one holder each replace what the other opened.
- A call acts on the current episode, or on one the client names, through the manager: a call
  on an episode a start has just ended is refused as unknown and spends nothing, and a call
  with nothing held is refused with the door's own advice.
- `abandon` ends the current episode unanswered and gives its total; a call still running on
  it books nothing (see `Episode.work`).
- `close` ends everything held; a later start or call is refused with the reason.
- A holder garbage-collected while it holds episodes ends them (see `dropped`).
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import uuid
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from env_core.episode import Episode, ToolResult, refusal
from env_core.errors import CapacityError, SessionClosedError, UnknownEpisodeError
from env_core.manager import EpisodeManager
from env_core.sandbox import Work, finish

log = logging.getLogger(__name__)


class EpisodeHolder:
    """The episodes one client holds; the newest it started is its current episode."""

    def __init__(
        self,
        manager: EpisodeManager,
        *,
        idle: str,
        owned: bool = True,
        client: str | None = None,
        keeps: int = 1,
        full: str = "",
    ) -> None:
        """`idle`: the door's refusal of a call made while it holds no episode. `owned`: its
        episodes answer this holder only (else any caller that knows their id). `client`: the
        remote address whose episodes the manager caps together. `keeps`: how many episodes a
        start with `keep_previous` may leave open, `full` the door's refusal beyond that."""
        self.manager = manager
        self.owner = uuid.uuid4().hex if owned else None
        self.client = client
        self._idle = idle
        self._keeps = keeps
        self._full = full
        self._held: list[Episode] = []  # changed in place: the drop finalizer holds it
        self._current: Episode | None = None
        self._closed: str | None = None
        self._dropping: weakref.finalize | None = None
        # Held while episodes are replaced or ended: two starts racing on one holder would
        # each open an episode in place of the same old one, leaving one of the two open. A
        # call is not made under it: the engine refuses a call made while another runs.
        self._lock = threading.Lock()

    @property
    def episode(self) -> Episode | None:
        """The current episode: the last one started, unless it was ended since."""
        return self._current

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def start(
        self, keep_previous: bool = False, episode_id: str | None = None, **selectors: Any
    ) -> Episode:
        """Open the episode `selectors` name (see `EpisodeManager.choose_question`) as the
        current one; the others held end, unless `keep_previous` (then only finished ones)."""
        close_dropped()
        with self._lock:
            if self._closed is not None:
                raise SessionClosedError(self._closed)
            question = self.manager.choose_question(**selectors)
            kept = [e for e in self._held if keep_previous and self._open(e)]
            if len(kept) >= self._keeps:
                raise CapacityError(self._full)
            leaving = [e for e in self._held if not any(e is k for k in kept)]
            episode = self.manager.create(
                question_id=question.id,
                episode_id=episode_id,
                owner=self.owner,
                client=self.client,
                replacing=leaving,
            )
            self._held[:] = [*kept, episode]
            self._current = episode
            if self._dropping is None:
                self._dropping = weakref.finalize(
                    self, _end_dropped, dropped(), self.manager, self.owner, self._held
                )
        return episode

    def _open(self, episode: Episode) -> bool:
        return not episode.done and self.manager.is_open(episode)

    def resolve(self, episode_id: str | None = None) -> str:
        """The id of the episode a call acts on: `episode_id`, else the current episode's."""
        if episode_id:
            return episode_id
        current = self._current
        if current is None:
            raise UnknownEpisodeError(self._closed or self._idle)
        return current.episode_id

    def refused(self, tool: str) -> ToolResult:
        """The refusal of a call made while no episode is held."""
        return refusal(tool, UnknownEpisodeError(self._closed or self._idle))

    def work(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        episode_id: str | None = None,
    ) -> Work[ToolResult]:
        """A call as work for `finish` / `finish_async`, on the episode `resolve` names."""
        try:
            resolved = self.resolve(episode_id)
        except UnknownEpisodeError as error:
            return refusal(tool, error)
        return (yield from self.manager.work(resolved, tool, arguments, self.owner))

    def call(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        episode_id: str | None = None,
    ) -> ToolResult:
        return finish(self.work(tool, arguments, episode_id))

    def abandon(self) -> float:
        """End the current episode unanswered, booking the wrong-answer reward, and give its
        total reward (0 when none was started)."""
        with self._lock:
            if self._current is None:
                return 0.0
            self._current.abandon()
            return self._current.total_reward

    def end(self, episode_id: str) -> bool:
        """End an episode; False if it was not open (to this holder)."""
        with self._lock:
            if self._current is not None and self._current.episode_id == episode_id:
                self._current = None
            self._held[:] = [e for e in self._held if e.episode_id != episode_id]
        return self.manager.close(episode_id, self.owner)

    def close(self, why: str) -> None:
        """End every episode held; later starts and calls are refused, saying `why`."""
        with self._lock:
            self._closed = why
            ending = list(self._held)
            self._held.clear()
            self._current = None
        _end_all(self.manager, self.owner, ending)


def _end_all(manager: EpisodeManager, owner: str | None, episodes: list[Episode]) -> None:
    for episode in list(episodes):
        manager.close(episode.episode_id, owner)


def _end_dropped(
    closes: queue.SimpleQueue[Callable[[], object]],
    manager: EpisodeManager,
    owner: str | None,
    held: list[Episode],
) -> None:
    if held:
        closes.put(functools.partial(_end_all, manager, owner, held))


@functools.cache
def dropped() -> queue.SimpleQueue[Callable[[], object]]:
    """Where a holder (or a door's client) that is garbage-collected while it holds something
    (its episodes, its connection) leaves the call that closes it, for a thread of its own
    (started here) to make. The collector may run that finalizer while the collecting thread
    holds the manager's lock, so it only queues (a SimpleQueue takes none)."""
    closes: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()

    def close_in_turn() -> None:
        while True:
            _close(closes.get())

    threading.Thread(target=close_in_turn, name="sqlenv-dropped", daemon=True).start()
    return closes


def close_dropped() -> None:
    """Close, in this thread, what dropped holders left: a trainer that makes and drops them
    faster than the closing thread runs would otherwise find every slot held."""
    closes = dropped()
    while True:
        try:
            close = closes.get_nowait()
        except queue.Empty:
            return
        _close(close)


def _close(close: Callable[[], object]) -> None:
    try:
        close()
    except Exception:  # the thing was already closed, or its server gone: nothing is held
        log.debug("closing what a dropped holder held failed", exc_info=True)
