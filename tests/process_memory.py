"""Resident memory of a process and its descendants (a server and its SQL workers), sampled
while something runs, so a test can assert a bound on the peak and on what is kept after."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1 << 20


def tree_rss(pid: int) -> int:
    """Bytes resident in `pid` and every process below it, now."""
    total = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):  # it exited meanwhile
            total += int(Path(f"/proc/{member}/statm").read_text().split()[1]) * PAGE
    return total


def process_tree(pid: int) -> list[int]:
    """`pid` and every process below it, less a child caught between fork and exec: until it
    runs a program of its own it is a copy of its parent, whose resident pages it shares and
    would count again (a server starting a SQL worker would seem to double for a moment)."""
    members, pending = [], [pid]
    while pending:
        current = pending.pop()
        if current in members:  # seen twice while the thread that started it was ending
            continue
        members.append(current)
        command = _command(current)
        for task in _threads_leader_last(current):
            with contextlib.suppress(OSError):
                children = (int(child) for child in (task / "children").read_text().split())
                pending.extend(child for child in children if _command(child) != command)
    return members


def _threads_leader_last(pid: int) -> list[Path]:
    """Each thread lists only the children it started (a pool's threads start SQL workers).
    A thread that ends hands its children to the main thread, so the main thread is read
    last: read first, a child handed over after it would be missed in both lists."""
    return sorted(Path(f"/proc/{pid}/task").glob("*"), key=lambda task: task.name == str(pid))


def _command(pid: int) -> bytes | None:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    return None


class PeakRSS:
    """`with PeakRSS(pid) as peak:` samples the tree every 5 ms; `peak.bytes` is the most
    seen, `peak.before` what it held on entry."""

    def __init__(self, pid: int = os.getpid(), interval_s: float = 0.005) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.before = self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakRSS:
        self.before = self.bytes = tree_rss(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.bytes = max(self.bytes, tree_rss(self.pid))

    @property
    def growth_mib(self) -> float:
        return (self.bytes - self.before) / MIB

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.bytes = max(self.bytes, tree_rss(self.pid))
            time.sleep(self.interval_s)
