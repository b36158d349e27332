"""Python's garbage collector, set for a serving process.

A call through the MCP SDK or OpenEnv allocates thousands of short-lived container objects
(requests, streams, tasks, models). With Python's default thresholds the collector then runs a
young collection every few calls and, now and then, a full one over everything start-up built
(the frameworks' modules, the catalog): under load that was a sixth of the MCP server's time
per call, and each full collection a pause of ~100 ms (`docs/profiles.md`).
"""

from __future__ import annotations

import gc

# Container allocations (less deallocations) between young collections; Python's default is 700.
YOUNG_THRESHOLD = 10_000
# Young collections between collections of the middle generation, and those between full ones.
OLDER_THRESHOLDS = (20, 20)


def tune_for_serving() -> None:
    """Called once start-up is done: what it built is kept out of every later collection
    (`gc.freeze`), and young objects are collected less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
