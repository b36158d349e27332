"""The SQL workers are shared fairly: jobs in line are served in turn by client, a job that
no worker takes within its time limit is refused without being run, and a job whose caller
gave up runs to its end on the worker it has rather than costing a process start. Through an
episode, a refusal (no worker free in time, or none can start) spends no step and the call
given up spends one."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from adversarial import CONCERT

from env_core.errors import QueryTimeoutError, ServerBusyError, error_data
from env_core.executor_limits import ExecutorLimits
from env_core.manager import EpisodeManager, SessionConfig
from env_core.sandbox import (
    START_RETRY_S,
    STARTER_THREAD,
    Job,
    Sandbox,
    finish_async,
    waiting_limit,
)

# ~0.06 s in a worker on a quick machine, ~0.15 s on a slower one.
SLOW = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 400000) "
    "SELECT count(*) FROM c"
)
# ~0.35 s (quick machine): a worker stays held while the calls after it line up, 10 ms apart.
SLOWER = SLOW.replace("400000", "2500000")
FOREVER = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
# One row of 2,000 instr() calls on 20 KB values: the progress handler cannot stop it, so it
# holds its worker until the worker is killed, its time limit and grace after it started.
STUCK = "WITH s(a, b) AS (SELECT hex(zeroblob(9999)), hex(zeroblob(2500)) || '1') SELECT " + (
    ", ".join(["instr(a, b)"] * 2_000) + " FROM s"
)
STUCK_LIMITS = ExecutorLimits(timeout_s=0.5, max_sql_chars=30_000)
LIMITS = ExecutorLimits()


@pytest.fixture
def concert(spider_dir) -> Path:
    return spider_dir / "database" / CONCERT / f"{CONCERT}.sqlite"


@pytest.fixture
def one_worker(concert):
    """A sandbox of one worker, started."""
    pool = Sandbox(workers=1)
    pool.run(query(concert, "SELECT 1"))
    yield pool
    pool.close()


def query(path: Path, sql: str, client: str | None = None, limits: ExecutorLimits = LIMITS) -> Job:
    return Job(str(path), True, limits, "query", sql, 20, client)


def in_thread(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args)
    thread.start()
    return thread


def test_jobs_in_line_are_served_in_turn_by_client(concert, one_worker):
    finished: list[str] = []

    def run(name: str, client: str, sql: str = SLOW) -> None:
        one_worker.run(query(concert, sql, client))
        finished.append(name)

    threads = [in_thread(run, "a0", "a", SLOWER)]
    time.sleep(0.05)  # a0 holds the worker; the rest line up in this order
    for name in ("a1", "a2", "a3", "a4"):
        threads.append(in_thread(run, name, "a"))
        time.sleep(0.01)
    threads.append(in_thread(run, "b", "b"))
    for thread in threads:
        thread.join()
    # In order of arrival b would be last; in turn it comes after one more of a's jobs.
    assert finished == ["a0", "a1", "b", "a2", "a3", "a4"]


def hold_until_killed(pool: Sandbox, job: Job) -> None:
    with pytest.raises(QueryTimeoutError):
        pool.run(job)


def test_a_job_no_worker_takes_in_time_is_refused(concert, one_worker):
    holder = in_thread(hold_until_killed, one_worker, query(concert, STUCK, "a", STUCK_LIMITS))
    time.sleep(0.05)
    # It may wait ten times its 0.03 s limit; the worker is held 1 s.
    waiting = query(concert, "SELECT count(*) FROM singer", "b", ExecutorLimits(timeout_s=0.03))
    assert waiting_limit(waiting) == pytest.approx(0.3)
    started = time.monotonic()
    with pytest.raises(ServerBusyError, match=r"no SQL worker was free within 0\.3 s"):
        one_worker.run(waiting)
    assert time.monotonic() - started < 0.6  # not held until the worker came free
    with pytest.raises(ServerBusyError):
        asyncio.run(one_worker.run_async(waiting))
    holder.join()
    assert one_worker.run(waiting)[1] == ((6,),)
    assert one_worker.killed == 1


def worker_pids(pool: Sandbox) -> list[int]:
    return [worker.process.pid for worker in pool._idle]


def test_a_job_given_up_runs_to_its_end_on_its_worker(concert, one_worker):
    workers = worker_pids(one_worker)

    async def give_up_then_query():
        call = asyncio.ensure_future(one_worker.run_async(query(concert, SLOW)))
        await asyncio.sleep(0.05)
        call.cancel()
        return await one_worker.run_async(query(concert, "SELECT count(*) FROM singer"))

    assert asyncio.run(give_up_then_query())[1] == ((6,),)
    assert one_worker.killed == 0
    assert worker_pids(one_worker) == workers  # the same process, not a replacement


# When the statement runs, in seconds since the epoch.
RAN_AT = "SELECT (julianday('now') - 2440587.5) * 86400.0"


def test_a_worker_answering_a_job_that_waited_in_line_takes_the_next_while_the_loop_is_busy(
    concert, one_worker
):
    """A loop serving many sessions reads a reply only between all their ready work, so the
    reply of a job that waited in line (the machine is busy) is read by a thread of its own,
    which hands the worker the next job in line at once."""

    async def two_in_line_behind_a_busy_loop() -> tuple[float, float]:
        first = asyncio.ensure_future(one_worker.run_async(query(concert, SLOW)))
        await asyncio.sleep(0.05)  # first holds the worker
        second = asyncio.ensure_future(one_worker.run_async(query(concert, "SELECT 1")))
        third = asyncio.ensure_future(one_worker.run_async(query(concert, RAN_AT)))
        await first  # its worker took the second job, and the third waits in line
        time.sleep(0.5)  # the loop is busy
        busy_until = time.time()
        await second
        return (await third)[1][0][0], busy_until

    ran_at, busy_until = asyncio.run(two_in_line_behind_a_busy_loop())
    assert ran_at < busy_until


# A call may wait 0.5 s in line; a STUCK call holds the worker 0.55 s, and a worker starts
# after it (the line is not given up while one starts).
SHORT_LIMITS = ExecutorLimits(timeout_s=0.05, max_sql_chars=30_000)


@pytest.fixture
def manager(spider_catalog):
    config = SessionConfig(
        split="dev_without_wta_1", max_steps=5, sql_workers=1, limits=SHORT_LIMITS
    )
    sessions = EpisodeManager(spider_catalog, config)
    yield sessions
    sessions.shutdown()


def concert_episode(manager: EpisodeManager):
    return manager.create(db_id=CONCERT)


def test_a_call_given_up_while_it_runs_spends_a_step(manager):
    episode = concert_episode(manager)

    async def give_up():
        call = asyncio.ensure_future(
            finish_async(manager.work(episode.episode_id, "query", {"sql": FOREVER}))
        )
        await asyncio.sleep(0.1)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(give_up())
    assert episode.steps_used == 1
    spent = episode.history[0].result
    assert (spent.ok, spent.data["error"]) == (False, "call_cancelled")
    assert spent.reward < 0
    after = manager.step(episode.episode_id, "describe", {"table": "singer"})
    assert after.text.endswith("[3 steps left]")


def test_a_call_no_worker_takes_in_time_spends_no_step(manager):
    holders = [manager.create(db_id=CONCERT, client=client) for client in ("a", "b", "d")]
    waiting = manager.create(db_id=CONCERT, client="c")
    manager.step(waiting.episode_id, "describe", {"table": "singer"})  # a step of its own
    manager.step(holders[0].episode_id, "query", {"sql": "SELECT abs(1)"})  # the worker is up
    held = []
    for n, holder in enumerate(holders):  # three calls in turn hold the only worker 0.55 s each
        stuck = {"sql": f"{STUCK} -- {n}"}  # three statements: one would be run once for all
        held.append(in_thread(manager.step, holder.episode_id, "query", stuck))
        time.sleep(0.05)
    # Not "SELECT abs(1)": the sandbox ran that quickly, so it would now run in process.
    refused = manager.step(waiting.episode_id, "query", {"sql": "SELECT abs(2)"})
    for thread in held:
        thread.join()
    assert (refused.ok, refused.done, refused.data["error"]) == (False, False, "server_busy")
    assert refused.text.startswith("Error: the server is busy")
    assert waiting.steps_used == 1
    assert manager.step(waiting.episode_id, "query", {"sql": "SELECT abs(1)"}).ok


def test_a_call_when_no_worker_can_start_spends_no_step(manager, monkeypatch):
    """The process at its limit of threads: the pool cannot start its worker."""
    episode = concert_episode(manager)
    start = threading.Thread.start
    refusing = [True]

    def refused(thread: threading.Thread) -> None:
        if thread.name == STARTER_THREAD and refusing[0]:
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", refused)
    refused_call = manager.step(episode.episode_id, "query", {"sql": "SELECT abs(1)"})
    assert (refused_call.ok, refused_call.done) == (False, False)
    assert refused_call.data == error_data(ServerBusyError.without_workers())
    assert episode.steps_used == 0
    refusing[0] = False
    time.sleep(START_RETRY_S)
    assert manager.step(episode.episode_id, "query", {"sql": "SELECT abs(1)"}).ok


def test_a_clients_episodes_hold_up_another_clients_by_one_call_each(spider_catalog):
    config = SessionConfig(split="dev_without_wta_1", sql_workers=1)
    manager = EpisodeManager(spider_catalog, config)
    finished: list[str] = []

    def run(name: str, client: str, sql: str | None = None) -> None:
        episode = manager.create(db_id=CONCERT, client=client)
        sql = sql or f"{SLOW} -- {name}"  # a statement each: one would be run once for all
        assert manager.step(episode.episode_id, "query", {"sql": sql}).ok
        finished.append(name)

    try:
        run("start", "a", "SELECT abs(1)")  # the worker is up
        threads = [in_thread(run, "a0", "a", SLOWER)]
        time.sleep(0.05)
        for name in ("a1", "a2", "a3"):
            threads.append(in_thread(run, name, "a"))
            time.sleep(0.01)
        threads.append(in_thread(run, "b", "b"))
        for thread in threads:
            thread.join()
    finally:
        manager.shutdown()
    assert finished == ["start", "a0", "a1", "b", "a2", "a3"]
