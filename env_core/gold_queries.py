"""Gold queries run in the SQL sandbox's worker processes, several at once, each bounded as an
agent's query is: in time (compiling included) and in memory.

A gold the agent could not run within its own limits cannot be the key it is held to, so the
limits are the agent's (`--query-timeout`, `--sql-memory`). Worker processes also run the
golds of one database side by side, which threads in this process could not (the deadline's
progress handler takes the interpreter lock every few hundred SQLite steps), and they leave
this process's memory as it was however large the database.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from env_core.errors import DataError, QueryRejectedError, QueryTimeoutError, SQLEnvError, ToolError
from env_core.executor_limits import ExecutorLimits
from env_core.render import QueryResult
from env_core.sandbox import Job, Sandbox
from env_core.settings import Settings


@dataclass(frozen=True)
class GoldBounds:
    """How gold queries run: under the agent's `limits` and `memory_mb`, `workers` at once."""

    limits: ExecutorLimits = field(default_factory=ExecutorLimits)
    memory_mb: int = Settings.sql_memory_mb
    workers: int = Settings.sql_workers


@dataclass(frozen=True)
class GoldRun:
    """One gold query to run: its database file and its SQL."""

    database: Path
    sql: str


@dataclass(frozen=True)
class GoldFailure:
    """Why a gold query gave no result: an exclusion's reason and detail."""

    reason: str
    detail: str


def run_golds(
    runs: Sequence[GoldRun], bounds: GoldBounds, max_rows: int
) -> Iterator[QueryResult | GoldFailure]:
    """Each run's result or failure, in the order of `runs`, while later ones are running."""
    limits, memory_mb = bounds.limits, bounds.memory_mb
    sandbox = Sandbox(bounds.workers, memory_mb)

    def run(gold: GoldRun) -> QueryResult | GoldFailure:
        job = Job(str(gold.database), True, limits, "query", gold.sql, max_rows)
        try:
            return QueryResult(*sandbox.run(job))
        except QueryTimeoutError:
            return GoldFailure(
                "gold timed out", f"gold ran longer than {limits.timeout_s:g} s (--query-timeout)"
            )
        except QueryRejectedError as error:
            if "MiB of memory" in str(error):
                return GoldFailure(
                    "gold over memory",
                    f"gold needed more than {memory_mb} MiB of memory (--sql-memory)",
                )
            return GoldFailure("gold failed", str(error))
        except ToolError as error:
            return GoldFailure("gold failed", str(error))

    pool = concurrent.futures.ThreadPoolExecutor(bounds.workers, thread_name_prefix="gold query")
    try:
        yield from pool.map(run, runs)
    except SQLEnvError as error:  # no worker could start: nothing can be prepared
        raise DataError(f"cannot run the gold queries: {error}") from None
    finally:
        pool.shutdown(cancel_futures=True)
        sandbox.close()
