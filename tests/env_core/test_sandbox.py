"""The sandbox bounds every agent statement in time and memory, preparation included, and
hands back what it used; normal queries give what they give in process."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest
from adversarial import CONCERT, RESOURCE_ATTACKS, WORLD
from process_memory import MIB, PeakRSS, process_tree, tree_rss

from env_core.errors import (
    InvalidArgumentError,
    QueryRejectedError,
    QueryTimeoutError,
    ToolError,
)
from env_core.executor import ReadOnlyExecutor
from env_core.executor_limits import ExecutorLimits
from env_core.render import QueryResult
from env_core.sandbox import GRACE_S, Sandbox, finish_async
from env_core.sandbox_worker import HEADROOM_BYTES

MEMORY_MB = 64
# What one call may add to this process tree: the budget, the worker's headroom, and a fresh
# worker started while the spent one exits.
CALL_BOUND_MIB = MEMORY_MB + HEADROOM_BYTES // MIB + 40
# Counted through a function: nothing but a worker runs it the first time (see
# env_core.programs), so it shows the pool answering.
COUNTED = "SELECT count(DISTINCT abs(Singer_ID)) FROM singer"
COMPILE_BLOWUPS = [attack for attack in RESOURCE_ATTACKS if attack.outcome == "rejected"]
NORMAL_QUERIES = [
    "SELECT count(*) FROM singer",
    "SELECT Name, Age FROM singer ORDER BY Age DESC",
    "SELECT T2.Name, count(*) FROM singer_in_concert AS T1 JOIN singer AS T2 "
    "ON T1.Singer_ID = T2.Singer_ID GROUP BY T2.Name ORDER BY 2 DESC, 1",
    "SELECT * FROM stadium",
    "SELECT Name FROM singer WHERE Name LIKE '%e%' LIMIT 3",
]
MISTAKES = [
    "SELECT nothing FROM singer",
    "SELECT * FROM singers",
    "DELETE FROM singer",
    "SELECT 1; SELECT 2",
    "SELECT printf('%.*c', 10, 'x')",
    "SELEC 1",
]


def database(database_dir: Path, db: str = CONCERT) -> Path:
    return database_dir / db / f"{db}.sqlite"


@pytest.fixture
def database_dir(spider_dir) -> Path:
    return spider_dir / "database"


@pytest.fixture
def sandbox():
    pool = Sandbox(workers=2, memory_mb=MEMORY_MB)
    yield pool
    pool.close()


@pytest.fixture
def sandboxed(database_dir, sandbox) -> ReadOnlyExecutor:
    executor = ReadOnlyExecutor(database(database_dir), sandbox=sandbox)
    executor.query("SELECT abs(1)")  # the workers are up before anything is measured
    yield executor
    executor.close()


def outcome(executor: ReadOnlyExecutor, sql: str) -> QueryResult | str:
    try:
        result = executor.query(sql)
    except ToolError as error:
        return f"{type(error).__name__}: {error}"
    return QueryResult(result.columns, result.rows, result.truncated, 0.0)


def test_results_and_errors_equal_the_in_process_ones(database_dir, sandboxed):
    in_process = ReadOnlyExecutor(database(database_dir))
    for sql in NORMAL_QUERIES + MISTAKES:
        assert outcome(sandboxed, sql) == outcome(in_process, sql), sql
    in_process.close()


def kept_after_replacement(before: int, within_s: float = 5.0) -> float:
    """MiB this process tree holds above `before` once the spent worker has been replaced by a
    fresh one (in the background: on a busy machine that takes more than a moment)."""
    deadline = time.monotonic() + within_s
    while (kept := (tree_rss(os.getpid()) - before) / MIB) >= 40 and time.monotonic() < deadline:
        time.sleep(0.1)
    return kept


@pytest.mark.parametrize("attack", COMPILE_BLOWUPS, ids=lambda attack: attack.id)
def test_a_statement_that_blows_up_while_prepared_is_stopped(sandboxed, attack):
    with PeakRSS() as peak:
        started = time.monotonic()
        with pytest.raises(QueryRejectedError, match=f"the {MEMORY_MB} MiB of memory"):
            sandboxed.query(attack.sql)
        elapsed = time.monotonic() - started
    assert elapsed < sandboxed.limits.timeout_s + 1.0, f"took {elapsed:.2f} s"
    assert peak.growth_mib < CALL_BOUND_MIB, f"grew {peak.growth_mib:.0f} MiB"
    assert sandboxed.query(COUNTED).rows == ((6,),)
    kept_mib = kept_after_replacement(peak.before)
    assert kept_mib < 40, f"kept {kept_mib:.0f} MiB after the call"


def test_wide_rows_are_capped_while_they_are_fetched(sandboxed):
    attack = next(attack for attack in RESOURCE_ATTACKS if attack.id == "wide_rows")
    with PeakRSS() as peak:
        result = sandboxed.query(attack.sql)
    assert result.truncated and len(result.rows) == 1
    shown = sum(len(cell) for row in result.rows for cell in row)
    assert shown <= sandboxed.limits.max_result_chars
    # One row (1,990 x 18 KB) is held at a time, never the 21 rows (~750 MB).
    assert peak.growth_mib < CALL_BOUND_MIB, f"grew {peak.growth_mib:.0f} MiB"


def test_a_row_that_cannot_be_interrupted_is_killed_past_the_deadline(database_dir, sandbox):
    # 2,000 instr() calls on 20 KB values run as one row of straight-line code, which the
    # progress handler cannot interrupt: in process that row takes ~2 s, far past the deadline
    # and its grace on any machine (the SQL limit is raised to make room for the calls).
    limits = ExecutorLimits(timeout_s=0.05, max_sql_chars=30_000)
    executor = ReadOnlyExecutor(database(database_dir), limits, sandbox=sandbox)
    calls = ", ".join(["instr(a, b)"] * 2_000)
    values = "SELECT hex(zeroblob(9999)), hex(zeroblob(2500)) || '1'"
    sql = f"WITH s(a, b) AS ({values}) SELECT {calls} FROM s"
    started = time.monotonic()
    with pytest.raises(QueryTimeoutError, match=r"0\.05 s time limit"):
        executor.query(sql)
    elapsed = time.monotonic() - started
    assert elapsed < limits.timeout_s + GRACE_S + 0.3, f"took {elapsed:.2f} s"
    assert sandbox.killed == 1
    assert executor.query(COUNTED).rows == ((6,),)


def test_concurrent_attacks_stay_within_the_workers_budgets(database_dir, sandboxed, sandbox):
    attack = COMPILE_BLOWUPS[0]
    errors: list[BaseException] = []

    def attack_once() -> None:
        try:
            sandboxed.query(attack.sql)
        except ToolError as error:
            errors.append(error)

    normal = ReadOnlyExecutor(database(database_dir, WORLD), sandbox=sandbox)
    threads = [threading.Thread(target=attack_once) for _ in range(4)]
    with PeakRSS() as peak:
        for thread in threads:
            thread.start()
        started = time.monotonic()
        # A function, as COUNTED: it waits for a worker.
        assert normal.query("SELECT count(DISTINCT abs(ID)) FROM city").rows == ((4079,),)
        waited = time.monotonic() - started
        for thread in threads:
            thread.join()
    assert len(errors) == 4 and all(isinstance(e, QueryRejectedError) for e in errors)
    assert peak.growth_mib < sandbox.workers * CALL_BOUND_MIB, f"grew {peak.growth_mib:.0f} MiB"
    # A normal query waits at most for one attack to be stopped.
    assert waited < sandboxed.limits.timeout_s + 1.0, f"waited {waited:.2f} s"
    normal.close()


async def cancelled_then_counted(
    call: asyncio.Future, executor: ReadOnlyExecutor, timeout_s: float
) -> QueryResult:
    """Cancel `call`, then count the singers: the pool must still answer within `timeout_s`."""
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    after = finish_async(executor.query_work(COUNTED))
    return await asyncio.wait_for(after, timeout=timeout_s)


def test_a_cancelled_call_gives_its_worker_back(database_dir):
    pool = Sandbox(workers=1, memory_mb=MEMORY_MB)
    executor = ReadOnlyExecutor(database(database_dir), sandbox=pool)
    forever = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    )

    async def cancel_then_query() -> QueryResult:
        running = asyncio.ensure_future(finish_async(executor.query_work(forever)))
        await asyncio.sleep(0.2)
        return await cancelled_then_counted(running, executor, timeout_s=5)

    assert asyncio.run(cancel_then_query()).rows == ((6,),)
    pool.close()


SLOW = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 400000) "
    "SELECT count(*) FROM c"
)


# Five times SLOW: the only worker is still busy when a call gets in line behind it. Not SLOW
# itself, or that call would share its run, or be given its kept result.
HOLD = SLOW.replace("400000", "2000000")


def holding_the_only_worker(executor: ReadOnlyExecutor) -> threading.Thread:
    """A thread running a long query on a one-worker sandbox; the worker is busy on return."""
    sent = executor.sandbox.jobs
    thread = threading.Thread(target=executor.query, args=(HOLD,))
    thread.start()
    deadline = time.monotonic() + 20  # the worker may be starting
    while executor.sandbox.jobs == sent:
        assert time.monotonic() < deadline, "the query never reached the worker"
        time.sleep(0.001)
    return thread


def test_a_queued_call_runs_while_its_event_loop_is_busy(database_dir):
    """A queued job is started by whoever frees the worker, and its deadline counts from
    then: a caller whose loop wakes long after still gets the reply that came in time."""
    pool = Sandbox(workers=1, memory_mb=MEMORY_MB)
    path = database(database_dir)
    slow = ReadOnlyExecutor(path, sandbox=pool)
    quick = ReadOnlyExecutor(path, ExecutorLimits(timeout_s=0.2), sandbox=pool)

    async def queued_behind_a_busy_loop() -> QueryResult:
        holder = holding_the_only_worker(slow)
        call = asyncio.ensure_future(finish_async(quick.query_work(COUNTED)))
        await asyncio.sleep(0.01)  # in line for the worker
        assert pool._waiting  # in line: the worker runs HOLD
        holder.join()
        time.sleep(1.0)  # the loop is busy past the call's deadline and grace
        return await call

    assert asyncio.run(queued_behind_a_busy_loop()).rows == ((6,),)
    assert pool.killed == 0
    pool.close()


def test_a_queued_call_cancelled_after_its_job_started_leaves_the_pool_working(database_dir):
    pool = Sandbox(workers=1, memory_mb=MEMORY_MB)
    executor = ReadOnlyExecutor(database(database_dir), sandbox=pool)

    async def cancel_a_started_job() -> QueryResult:
        holder = holding_the_only_worker(executor)
        call = asyncio.ensure_future(finish_async(executor.query_work(SLOW)))
        await asyncio.sleep(0.01)
        assert pool._waiting  # in line: the worker runs HOLD
        holder.join()  # the worker is free and already runs the queued job
        return await cancelled_then_counted(call, executor, timeout_s=10)

    assert asyncio.run(cancel_a_started_job()).rows == ((6,),)
    pool.close()


def test_a_closed_sandbox_refuses_clearly(sandboxed, sandbox):
    sandbox.close()
    with pytest.raises(QueryRejectedError, match="shutting down"):
        # A function: nothing proves it cheap (see env_core.programs), nor has it run before.
        sandboxed.query("SELECT abs(2)")


def test_text_that_is_not_unicode_is_refused_before_any_work(sandboxed):
    with pytest.raises(InvalidArgumentError, match="lone surrogate"):
        sandboxed.query("SELECT '\ud800'")
    assert sandboxed.query("SELECT 1").rows == ((1,),)


def test_the_sandbox_needs_a_worker_and_a_budget():
    with pytest.raises(ValueError, match="at least 1 worker"):
        Sandbox(workers=0)
    with pytest.raises(ValueError, match="16 MiB"):
        Sandbox(memory_mb=8)


def test_a_warmed_sandbox_has_its_workers_up_before_the_first_call(database_dir):
    def workers() -> set[int]:
        """This test's workers: a worker of an earlier test's may still be ending."""
        return set(process_tree(os.getpid())) - before

    before = set(process_tree(os.getpid()))
    pool = Sandbox(workers=2, memory_mb=MEMORY_MB)
    pool.warm()
    pool.warm()  # all are started: nothing more
    deadline = time.monotonic() + 30
    while len(workers()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    started = workers()
    assert len(started) == 2
    executor = ReadOnlyExecutor(database(database_dir), sandbox=pool)
    assert executor.query(COUNTED).rows == ((6,),)
    assert workers() == started
    executor.close()
    pool.close()
    pool.warm()  # closed: starts nothing
    time.sleep(0.5)
    assert not workers()
