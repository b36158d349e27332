"""What one call leaves for the next, process-wide: agent SQL proven quick enough to run in
process (`PROVEN`), and results read from files that never change, given again without running
any SQL (`KEPT`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from sys import getsizeof
from typing import Any

from env_core.render import QueryResult
from env_core.sandbox import SharedRun

# What proofs, shared runs and kept results are held under: the executor's serial, the
# statement, its row limit and the client it ran for (see `KeptResults`).
CallKey = tuple[int, str, int, str | None]


class ProvenStatements:
    """Agent SQL that a sandbox worker prepared and ran to its end within `PROOF_MS` on a file
    that never changes, calling no function whose value changes from run to run (chance, the
    clock): the same statement on the same file does the same work again, so it may
    run in process, where it skips the trip to a worker (~0.1 ms, more under load). The worker
    compiles every statement afresh (no statement cache), so the time proven includes that.
    A run in process still has a deadline (`DEADLINE_S`): past it, or on any error, the
    statement goes back to the sandbox, for good the second time. A proof, and a shared run,
    hold for the executor whose worker ran the statement (the episodes of one session manager;
    an assessment has its own) and the client it ran for, never another: whether a call is
    answered sooner tells a client nothing of what others asked. Bounded: the newest
    `ENTRIES` statements of at most `MAX_SQL_CHARS` each, over all executors."""

    PROOF_MS = 1.0
    DEADLINE_S = 0.005
    ENTRIES = 2048
    MAX_OVERRUNS = 2
    MAX_SQL_CHARS = 2_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proven: OrderedDict[CallKey, None] = OrderedDict()
        self._running: dict[CallKey, SharedRun] = {}
        # How often each statement overran or failed in process: at `MAX_OVERRUNS` it is not
        # proven again, though its runs in the sandbox stay quick.
        self._overruns: OrderedDict[CallKey, int] = OrderedDict()

    def holds(self, key: CallKey) -> bool:
        with self._lock:
            if key not in self._proven:
                return False
            self._proven.move_to_end(key)
            return True

    def running(self, key: CallKey) -> SharedRun | None:
        """The run of the statement another call has started, to wait for; else None, and the
        caller runs it, then reports to `ran`. Calls that ask for the same statement at once
        (the rollouts of one question) then take one worker, not one each."""
        with self._lock:
            if key in self._running:
                return self._running[key]
            self._running[key] = SharedRun()
            return None

    def ran(self, key: CallKey, result: QueryResult | None) -> None:
        """The sandbox's result for the statement (None if it failed or was given up): shared
        with the calls waiting for it if running it again would do the same work, and kept
        as its proof if that work was cheap."""
        repeatable = result is not None and result.repeatable
        cheap = repeatable and result.elapsed_ms <= self.PROOF_MS
        with self._lock:
            shared = self._running.pop(key)
            if cheap and self._trusted(key) and len(key[1]) <= self.MAX_SQL_CHARS:
                _keep(self._proven, key, None, self.ENTRIES)
        shared.share(result if repeatable else None)

    def trusted(self, key: CallKey) -> bool:
        """Whether the statement may run in process: it has overrun or failed there fewer than
        `MAX_OVERRUNS` times."""
        with self._lock:
            return self._trusted(key)

    def _trusted(self, key: CallKey) -> bool:
        return self._overruns.get(key, 0) < self.MAX_OVERRUNS

    def overran(self, key: CallKey) -> None:
        """The statement overran or failed in process: it loses its proof, for good once this
        has happened `MAX_OVERRUNS` times (once may be a pause of the machine's)."""
        with self._lock:
            self._proven.pop(key, None)
            _keep(self._overruns, key, self._overruns.get(key, 0) + 1, self.ENTRIES)


def _keep(newest: OrderedDict, key: Any, value: Any, entries: int) -> None:
    """Set `key` in a bounded mapping that forgets its oldest first."""
    newest[key] = value
    newest.move_to_end(key)
    if len(newest) > entries:
        newest.popitem(last=False)


PROVEN = ProvenStatements()


class KeptResults:
    """Results read from files that never change, kept to be given again without running any
    SQL: a statement that calls no function of chance or the clock (`QueryResult.repeatable`)
    reads the same rows from the same file every time, and agents ask again and again (every
    rollout of a question samples the same tables and tries the same queries). Like proofs,
    results are kept for the executor that read them and the client they were read for, never
    given to another client (whose call runs anew, as slowly as a new statement runs, and shows
    its own `elapsed_ms`) nor to another session manager, and let go when the executor closes.
    A client given its kept result sees what its own first run showed, `elapsed_ms` included.
    Bounded: the newest results, `max_bytes` in all with
    their statements (`result_bytes`); a result over `max_result_bytes` is not kept."""

    # What an entry holds beside its statement and result: its key, its pair, its place.
    ENTRY_BYTES = 400

    def __init__(self, max_bytes: int = 32 << 20, max_result_bytes: int = 1 << 20) -> None:
        self.max_bytes = max_bytes
        self.max_result_bytes = max_result_bytes
        self._lock = threading.Lock()
        self._results: OrderedDict[CallKey, tuple[QueryResult, int]] = OrderedDict()
        self.bytes = 0

    def get(self, key: CallKey) -> QueryResult | None:
        with self._lock:
            kept = self._results.get(key)
            if kept is None:
                return None
            self._results.move_to_end(key)
            return kept[0]

    def keep(self, key: CallKey, result: QueryResult) -> None:
        """Keep `result` if it is repeatable and small enough."""
        if not result.repeatable:
            return
        size = result_bytes(result) + held((key[1],)) + self.ENTRY_BYTES
        if size > self.max_result_bytes:
            return
        with self._lock:
            self._drop(key)
            self._results[key] = result, size
            self.bytes += size
            while self.bytes > self.max_bytes:
                self._drop(next(iter(self._results)))

    def forget(self, serial: int) -> None:
        """Let go of the results an executor read (it has closed)."""
        with self._lock:
            for key in [key for key in self._results if key[0] == serial]:
                self._drop(key)

    def _drop(self, key: CallKey) -> None:
        kept = self._results.pop(key, None)
        if kept is not None:
            self.bytes -= kept[1]


# Python's allocator gives every object a multiple of this.
ALIGNMENT = 16


def result_bytes(result: QueryResult) -> int:
    """The memory a result holds, never less: its tuples and every cell, shared ones too (see
    `held`), and its text."""
    size = held(result.columns) + held((result.text,)) + getsizeof(result.rows) + ALIGNMENT - 1
    for row in result.rows:
        size += held(row)
    return size


def held(values: tuple) -> int:
    """What a tuple and the values in it hold, each rounded up as the allocator rounds it; a
    text that is not ASCII with the UTF-8 copy it keeps once something has encoded it (a
    door's JSON, SQLite), which can triple a Latin-1 text."""
    size = getsizeof(values) + sum(map(getsizeof, values)) + (ALIGNMENT - 1) * (len(values) + 1)
    for value in values:
        if type(value) is str and not value.isascii():
            size += len(value.encode("utf-8", "surrogatepass")) + 1
    return size


KEPT = KeptResults()
