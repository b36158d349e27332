"""How far the preparation of a split is, on stderr: a bar redrawn in place on a terminal, plain
lines elsewhere (a log, CI), and nothing for a split that is ready within a second."""

from __future__ import annotations

import sys
import time
from typing import TextIO

BAR_CELLS = 30
REDRAW_S = 0.2  # a terminal's bar is drawn at most this often
QUIET_S = 1.0  # plain lines: at most one per tenth done, this long after the one before


class PreparationProgress:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.on_terminal = self.stream.isatty()
        self._shown_at = time.monotonic()
        self._tenth = 0

    def __call__(self, split: str, done: int, total: int) -> None:
        now = time.monotonic()
        if self.on_terminal:
            self._draw(split, done, total, now)
            return
        tenth = 10 * done // total
        if tenth > self._tenth and now - self._shown_at >= QUIET_S:
            self._tenth, self._shown_at = tenth, now
            print(f"split {split}: {done}/{total} questions prepared", file=self.stream, flush=True)
        if done == total:
            self._tenth, self._shown_at = 0, now

    def _draw(self, split: str, done: int, total: int, now: float) -> None:
        if done == total:  # the bar goes: the split's report takes its place
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._shown_at = now
            return
        if now - self._shown_at < REDRAW_S:
            return
        self._shown_at = now
        filled = BAR_CELLS * done // total
        bar = "#" * filled + "-" * (BAR_CELLS - filled)
        self.stream.write(f"\rsplit {split}: [{bar}] {done}/{total} questions prepared")
        self.stream.flush()
