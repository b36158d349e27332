"""The reply of a loop caller's job that waited in line is read by a thread of its own (see
`sandbox._LoopWaiter`): callers given up at any moment, jobs past their deadline, workers
killed under them, the loop or the sandbox closing, floods and mixed callers all leave the
pool whole, with one outcome for each call and no thread, process or error log left over."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import random
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from adversarial import CONCERT, cte_chain
from test_sandbox_sharing import FOREVER, LIMITS, SLOW, SLOWER, STUCK, STUCK_LIMITS, query

from env_core.errors import QueryFailedError, QueryRejectedError, ServerBusyError, SQLEnvError
from env_core.executor_limits import ExecutorLimits
from env_core.sandbox import (
    GRACE_S,
    REPLY_THREAD,
    START_RETRY_S,
    STARTER_THREAD,
    Sandbox,
    Worker,
)

COUNT = "SELECT count(*) FROM singer"
BLOW_UP = cte_chain(24)  # over the worker's memory budget: it answers, and is replaced
# A call may wait 1 s in line.
SHORT_LIMITS = ExecutorLimits(timeout_s=0.1)


@pytest.fixture
def concert(spider_dir) -> Path:
    return spider_dir / "database" / CONCERT / f"{CONCERT}.sqlite"


@pytest.fixture
def started():
    """Makes sandboxes with all their workers up, and closes them after the test."""
    pools: list[Sandbox] = []

    def started(workers: int) -> Sandbox:
        pool = Sandbox(workers=workers)
        pools.append(pool)
        ready(pool)
        return pool

    yield started
    for pool in pools:
        pool.close()


@pytest.fixture
def trouble(caplog):
    """What went wrong out of sight: exceptions no thread caught, and warnings or errors
    logged (an asyncio future's exception never retrieved, a task destroyed pending)."""
    found: list[str] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: found.append(f"{args.thread}: {args.exc_value!r}")
    caplog.set_level(logging.WARNING)

    def trouble() -> list[str]:
        gc.collect()  # an unretrieved future logs when it is collected
        return found + [record.getMessage() for record in caplog.records]

    yield trouble
    threading.excepthook = previous


def wait_until(condition, within_s: float) -> float:
    """Seconds it took `condition` to hold; fails after `within_s`."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < within_s, "not within the time given"
        time.sleep(0.01)
    return time.monotonic() - started


def ready(pool: Sandbox) -> list[int]:
    """Start the pool's workers; their pids, once every one is up."""
    pool.warm()
    wait_until(lambda: len(pool._idle) == pool.workers, 20)
    return worker_pids(pool)


def worker_pids(pool: Sandbox) -> list[int]:
    return sorted(worker.process.pid for worker in pool._idle)


def children() -> set[int]:
    """This process's children that have not exited."""
    live = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The command may hold spaces and parentheses: the fields follow its last ")".
            state, parent = stat.read_text().rsplit(")", 1)[1].split()[:2]
        except OSError:
            continue  # it exited meanwhile
        if int(parent) == os.getpid() and state != "Z":
            live.add(int(stat.parent.name))
    return live


@pytest.fixture
def live_workers():
    """The children started during the test that have not exited: the workers of its pools
    (other tests' servers and pools may hold theirs meanwhile)."""
    before = children()
    return lambda: sorted(children() - before)


def resident_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reply_threads() -> int:
    return sum(thread.name == REPLY_THREAD for thread in threading.enumerate())


def whole(pool: Sandbox, pids: list[int]) -> None:
    """Every worker back idle, the same processes, nobody in line, no reply thread left."""
    wait_until(lambda: len(pool._idle) == pool.workers and not reply_threads(), 5)
    assert (pool._processes, pool.killed, bool(pool._waiting)) == (pool.workers, 0, False)
    assert worker_pids(pool) == pids


@pytest.fixture
def ask(concert):
    """A call's rows, or the kind and text of the engine error it ended with."""

    async def ask(pool: Sandbox, sql: str, client: str | None = None, limits=LIMITS) -> tuple:
        try:
            return ("rows", (await pool.run_async(query(concert, sql, client, limits)))[1])
        except SQLEnvError as error:
            return (type(error).__name__, str(error))

    return ask


def test_callers_given_up_in_line_as_they_are_served_and_while_they_run_leave_the_pool_whole(
    concert, ask, started, trouble
):
    pool = started(2)
    pids = worker_pids(pool)
    statements = [COUNT, "SELECT 1", "SELEC x", SLOW.replace("400000", "20000")]

    async def storm(seed: int) -> Counter:
        chance = random.Random(seed)
        loop = asyncio.get_running_loop()
        calls = []
        for _ in range(300):
            call = asyncio.ensure_future(pool.run_async(query(concert, chance.choice(statements))))
            calls.append(call)
            if chance.random() < 0.5:  # in line, handed a worker, running or answered
                loop.call_later(chance.random() * 0.2, call.cancel)
        ended = await asyncio.gather(*calls, return_exceptions=True)
        return Counter(type(end).__name__ for end in ended)

    for seed in range(3):
        ends = asyncio.run(storm(seed))
        assert set(ends) == {"tuple", "QueryFailedError", "CancelledError"}
    whole(pool, pids)  # a job given up ran to its end on its worker: none was replaced
    assert asyncio.run(ask(pool, COUNT)) == ("rows", ((6,),))
    assert trouble() == []


def test_with_no_thread_to_start_the_loop_reads_every_reply_and_the_pool_stays_whole(
    concert, ask, started, trouble, monkeypatch
):
    """A process at its limit of threads (a container's limit of processes) cannot start a
    reply thread: the loop reads those replies as it reads an idle worker's."""
    pool = started(2)
    pids = worker_pids(pool)
    start = threading.Thread.start

    def refused(thread: threading.Thread) -> None:
        if thread.name == REPLY_THREAD:
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", refused)

    async def in_line_and_given_up() -> Counter:
        loop = asyncio.get_running_loop()
        calls = []
        for number in range(60):
            sql = SLOW.replace("400000", "20000") if number % 3 else COUNT
            calls.append(asyncio.ensure_future(pool.run_async(query(concert, sql))))
            if number % 4 == 0:
                loop.call_later(0.01 * number, calls[-1].cancel)
        ended = await asyncio.gather(*calls, return_exceptions=True)
        return Counter(type(end).__name__ for end in ended)

    assert set(asyncio.run(in_line_and_given_up())) == {"tuple", "CancelledError"}
    whole(pool, pids)
    assert asyncio.run(ask(pool, COUNT)) == ("rows", ((6,),))
    assert trouble() == []


def test_a_worker_that_cannot_be_replaced_fails_its_calls_clearly_until_one_can_start(
    concert, ask, started, trouble, monkeypatch
):
    """With no thread to start a replacement (the process at its limit), the call that lost
    its worker and the calls after it are refused at once, none waits for a worker that will
    never come, and the pool starts one again once it can."""
    pool = started(1)
    [victim] = worker_pids(pool)
    start = threading.Thread.start
    threads_left = [False]

    def refused(thread: threading.Thread) -> None:
        if thread.name == STARTER_THREAD and not threads_left[0]:
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", refused)

    async def calls_without_a_worker() -> list:
        lost = asyncio.ensure_future(ask(pool, SLOW))
        await asyncio.sleep(0.05)
        os.kill(victim, signal.SIGKILL)
        return [await lost, await ask(pool, COUNT), await ask(pool, COUNT)]

    ends = asyncio.run(asyncio.wait_for(calls_without_a_worker(), 5))
    assert ends[0][0] == "QueryRejectedError"  # its worker was lost under it
    assert ends[1:] == [("ServerBusyError", str(ServerBusyError.without_workers()))] * 2
    assert (pool._processes, pool._starting, bool(pool._waiting)) == (0, 0, False)
    threads_left[0] = True
    time.sleep(START_RETRY_S)  # the pool tries again once it has waited this long
    assert asyncio.run(asyncio.wait_for(ask(pool, COUNT), 20)) == ("rows", ((6,),))
    assert worker_pids(pool) != [victim]
    pool.close()
    assert pool._processes == 0
    assert [message for message in trouble() if "can't start" not in message] == []


def gone(pid: int) -> None:
    """Kill a worker and wait until it has ended (a zombie until the pool reaps it)."""
    os.kill(pid, signal.SIGKILL)
    stat = Path(f"/proc/{pid}/stat")
    wait_until(lambda: stat.read_text().rsplit(")", 1)[1].split()[0] == "Z", 5)


def test_a_worker_ended_while_idle_is_replaced_rather_than_given_a_call(concert, ask, started):
    pool = started(1)
    [victim] = worker_pids(pool)
    gone(victim)
    assert asyncio.run(ask(pool, COUNT)) == ("rows", ((6,),))
    assert worker_pids(pool) != [victim]
    assert (pool._processes, pool.killed) == (1, 0)


@pytest.mark.parametrize("caller", ["event loop", "thread"])
def test_a_worker_killed_under_its_job_says_so_rather_than_blame_the_query(
    concert, started, caller
):
    """The system short of memory or an operator ends a worker with a signal; the query's own
    memory stop is the worker's answer (`BLOW_UP`). The call says which signal, not that the
    query went over its memory, and the worker is replaced."""
    pool = started(1)
    [victim] = worker_pids(pool)
    killer = threading.Timer(0.1, os.kill, (victim, signal.SIGKILL))
    killer.start()
    job = query(concert, FOREVER)
    with pytest.raises(QueryRejectedError) as stopped:
        asyncio.run(pool.run_async(job)) if caller == "event loop" else pool.run(job)
    killer.join()
    assert str(stopped.value) == str(QueryRejectedError.worker_ended("SIGKILL"))
    with pytest.raises(QueryRejectedError) as over_memory:
        pool.run(query(concert, BLOW_UP))
    assert str(over_memory.value) == str(QueryRejectedError.over_memory(pool.memory_mb))
    assert pool.run(query(concert, COUNT))[1] == ((6,),)
    assert victim not in worker_pids(pool)


def test_a_worker_that_ends_just_before_its_job_is_sent_leaves_the_call_untaken(
    concert, ask, started, monkeypatch
):
    """It ended after the pool last saw it alive: the job never ran, so the call is refused
    as not taken (no step spent), not charged as a query that used too much memory."""
    pool = started(1)
    [victim] = worker_pids(pool)
    monkeypatch.setattr(Worker, "alive", True)  # it dies between that check and the send
    gone(victim)
    assert asyncio.run(ask(pool, COUNT)) == ("ServerBusyError", str(ServerBusyError.worker_lost()))
    assert asyncio.run(ask(pool, COUNT)) == ("rows", ((6,),))
    assert worker_pids(pool) != [victim]


def test_when_a_worker_cannot_be_replaced_the_line_waits_for_the_workers_left(
    concert, ask, started, trouble, monkeypatch
):
    """A pool that can run fewer workers than it was given (a limit of processes) serves
    every call more slowly rather than refusing those in line, and tries to start another
    at most once every START_RETRY_S."""
    pool = started(2)
    lost, kept = worker_pids(pool)
    start = threading.Thread.start
    tries = [0]

    def refused(thread: threading.Thread) -> None:
        if thread.name == STARTER_THREAD:
            tries[0] += 1
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", refused)
    gone(lost)

    async def calls() -> list:
        return await asyncio.gather(*(ask(pool, SLOW, str(n)) for n in range(6)))

    assert asyncio.run(asyncio.wait_for(calls(), 10)) == [("rows", ((400000,),))] * 6
    assert tries[0] == 1
    assert worker_pids(pool) == [kept]
    assert [message for message in trouble() if "can't start" not in message] == []


@pytest.mark.parametrize(
    "given_up",
    [SLOW.replace("400000", "300000"), FOREVER],  # it answers rows; it ends in an error
    ids=["rows", "error"],
)
def test_a_caller_given_up_while_a_thread_reads_its_reply_leaves_its_outcome_unread(
    concert, ask, started, trouble, given_up
):
    """The outcome nobody waits for is dropped unread: no "Future exception was never
    retrieved" is logged for it, and the next caller gets its own rows."""
    pool = started(1)
    pids = worker_pids(pool)

    async def give_up_the_second() -> list:
        first = asyncio.ensure_future(ask(pool, SLOW))
        await asyncio.sleep(0.02)
        second = asyncio.ensure_future(ask(pool, given_up, "a", STUCK_LIMITS))
        third = asyncio.ensure_future(ask(pool, COUNT, "b"))
        await first
        await asyncio.sleep(0.02)
        assert reply_threads() == 1  # the second runs, read by a thread
        second.cancel()
        # The loop runs on until after the second's outcome came (the third waited for it).
        return [await third, second.cancelled()]

    assert asyncio.run(give_up_the_second()) == [("rows", ((6,),)), True]
    whole(pool, pids)
    assert trouble() == []


@pytest.mark.parametrize(
    ("sql", "killed"),
    [(STUCK, 1), (FOREVER, 0)],  # killed past its deadline; stopped in the worker at it
    ids=["stuck", "forever"],
)
def test_a_job_that_waited_in_line_is_stopped_at_its_deadline_and_the_next_is_served(
    concert, ask, started, trouble, live_workers, sql, killed
):
    pool = started(1)
    pids = worker_pids(pool)

    async def in_line_behind_a_slow_job() -> list:
        began = time.monotonic()

        async def timed(call) -> tuple:
            return await call, time.monotonic() - began

        first = asyncio.ensure_future(timed(ask(pool, SLOW)))
        await asyncio.sleep(0.02)
        held = asyncio.ensure_future(timed(ask(pool, sql, "a", STUCK_LIMITS)))
        await asyncio.sleep(0.01)
        after = asyncio.ensure_future(timed(ask(pool, COUNT, "b")))
        return await asyncio.gather(first, held, after)

    (first, served), (timed_out, ended), (rows, answered) = asyncio.run(in_line_behind_a_slow_job())
    assert first == ("rows", ((400000,),))
    assert timed_out[0] == "QueryTimeoutError"
    assert rows == ("rows", ((6,),))
    limit = STUCK_LIMITS.timeout_s + (GRACE_S if killed else 0)
    # Its time counts from when it left the line: the worker gets it before this task sees the
    # first call's rows (a few ms under load); counted from when it was asked for, it would end
    # ~0.13 s early, the time SLOW still had to run.
    assert limit - 0.05 <= ended - served < limit + 0.3
    assert answered - ended < 2.0  # a replacement starts in ~0.3 s
    assert pool.killed == killed
    assert (worker_pids(pool) != pids) == bool(killed)
    wait_until(lambda: not reply_threads(), 1)
    assert len(live_workers()) == 1
    assert trouble() == []


def test_the_loop_closing_while_a_thread_reads_a_reply_gives_the_worker_back(
    concert, ask, started, trouble
):
    pool = started(1)
    pids = worker_pids(pool)

    async def leave_a_job_running() -> None:
        first = asyncio.ensure_future(ask(pool, SLOW))
        await asyncio.sleep(0.02)
        left = [
            asyncio.ensure_future(ask(pool, SLOW)),  # in line: a thread will read its reply
            asyncio.ensure_future(ask(pool, COUNT)),  # in line when the loop closes
        ]
        await first
        await asyncio.sleep(0.02)
        assert reply_threads() == 1
        assert not any(call.done() for call in left)

    asyncio.run(leave_a_job_running())
    whole(pool, pids)
    assert asyncio.run(ask(pool, "SELECT 2")) == ("rows", ((2,),))
    assert trouble() == []


def test_the_loop_closing_while_it_reads_a_reply_gives_the_worker_back(concert, ask, started):
    pool = started(1)

    async def leave_a_job_running() -> None:
        left = asyncio.ensure_future(ask(pool, SLOW))  # found the worker idle
        await asyncio.sleep(0.02)
        assert not left.done()

    asyncio.run(leave_a_job_running())
    gc.collect()
    time.sleep(0.3)  # its job ended
    assert len(pool._idle) == 1
    # Without the worker, this waits its 1 s in line and is refused: the pool is dead.
    assert asyncio.run(ask(pool, "SELECT 3", limits=SHORT_LIMITS)) == ("rows", ((3,),))


def test_closing_the_sandbox_refuses_the_line_at_once_and_ends_every_worker_and_thread(
    concert, ask, started, trouble, live_workers
):
    pool = started(2)

    async def close_while_busy() -> tuple[list, float]:
        began = time.monotonic()

        async def timed(call) -> tuple:
            return (await call)[0], round(time.monotonic() - began, 2)

        calls = [asyncio.ensure_future(timed(ask(pool, SLOW))) for _ in range(2)]
        await asyncio.sleep(0.02)
        calls.append(asyncio.ensure_future(timed(ask(pool, STUCK, "a", STUCK_LIMITS))))
        calls.append(asyncio.ensure_future(timed(ask(pool, SLOWER, "b"))))
        calls += [asyncio.ensure_future(timed(ask(pool, COUNT, "c"))) for _ in range(4)]
        await asyncio.gather(*calls[:2])
        await asyncio.sleep(0.02)
        assert reply_threads() == 2  # STUCK and SLOWER run; four wait
        pool.close()
        closed = time.monotonic() - began
        return await asyncio.gather(*calls), closed

    ends, closed = asyncio.run(close_while_busy())
    assert [kind for kind, _ in ends[:4]] == ["rows", "rows", "QueryTimeoutError", "rows"]
    assert {kind for kind, _ in ends[4:]} == {"QueryRejectedError"}
    assert all(at < closed + 0.1 for _, at in ends[4:])  # refused at once
    # STUCK took the first worker freed: killed its time limit and grace after.
    deadline = min(ends[0][1], ends[1][1]) + STUCK_LIMITS.timeout_s + GRACE_S
    assert deadline - 0.02 <= ends[2][1] < deadline + 0.3
    wait_until(lambda: not reply_threads(), 0.5)
    wait_until(lambda: not live_workers(), 2)  # a replacement may be starting
    assert (pool._idle, bool(pool._waiting)) == ([], False)
    with pytest.raises(QueryRejectedError, match="shutting down"):
        pool.run(query(concert, COUNT))
    assert trouble() == []


def test_a_worker_killed_while_a_thread_reads_its_reply_fails_that_call_alone(
    concert, ask, started, trouble
):
    pool = started(1)
    [victim] = worker_pids(pool)

    async def kill_it_under_a_job_in_line() -> list:
        first = asyncio.ensure_future(ask(pool, SLOW))
        await asyncio.sleep(0.02)
        doomed = asyncio.ensure_future(ask(pool, FOREVER, "a"))
        after = [asyncio.ensure_future(ask(pool, COUNT, client)) for client in "bcd"]
        await first
        await asyncio.sleep(0.05)
        assert reply_threads() == 1
        os.kill(victim, signal.SIGKILL)
        return [await doomed, *await asyncio.gather(*after)]

    doomed, *after = asyncio.run(kill_it_under_a_job_in_line())
    assert doomed == ("QueryRejectedError", str(QueryRejectedError.worker_ended("SIGKILL")))
    assert after == [("rows", ((6,),))] * 3
    wait_until(lambda: len(pool._idle) == 1 and not reply_threads(), 2)
    assert worker_pids(pool) != [victim]
    assert (pool._processes, pool.killed) == (1, 0)
    assert trouble() == []


def test_a_flood_of_calls_gets_each_its_own_outcome_with_threads_and_memory_bounded(
    concert, ask, started, trouble, live_workers
):
    pool = started(2)
    statements = [COUNT, "SELECT name FROM singer ORDER BY name", SLOW, "SELEC x", "SELECT 1"]
    alone = {sql: asyncio.run(ask(pool, sql)) for sql in [*statements, BLOW_UP]}
    assert alone["SELEC x"][0] == QueryFailedError.__name__
    assert alone[BLOW_UP][0] == QueryRejectedError.__name__
    peak = [0]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            peak[0] = max(peak[0], reply_threads())
            time.sleep(0.0005)

    sampler = threading.Thread(target=sample)
    sampler.start()

    async def flood(seed: int) -> None:
        chance = random.Random(seed)
        picks = [chance.choice(statements) for _ in range(200)]
        for at in chance.sample(range(200), 3):
            picks[at] = BLOW_UP
        clients = [str(chance.randrange(8)) for _ in picks]
        ends = await asyncio.gather(
            *(ask(pool, *call) for call in zip(picks, clients, strict=True))
        )
        assert ends == [alone[sql] for sql in picks]

    try:
        sizes = []
        for seed in range(3):
            asyncio.run(flood(seed))
            gc.collect()
            sizes.append(resident_bytes())
    finally:
        sampling.set()
        sampler.join()
    # One a worker, and those that handed theirs on, ending: not one a caller (200 here).
    assert 1 <= peak[0] <= 6 * pool.workers
    assert sizes[-1] - sizes[0] < 8 << 20
    wait_until(lambda: len(pool._idle) == 2 and not reply_threads(), 2)
    assert (pool._processes, len(live_workers())) == (2, 2)
    assert trouble() == []


def test_callers_on_threads_and_on_several_loops_share_one_pool(concert, ask, started, trouble):
    pool = started(2)
    pids = worker_pids(pool)
    expected = {
        COUNT: ("rows", ((6,),)),
        "SELECT 7": ("rows", ((7,),)),
        "SELEC x": ("QueryFailedError", 'near "SELEC": syntax error'),
    }

    async def on_a_loop(seed: int) -> list:
        picks = random.Random(seed).choices(list(expected), k=100)
        ends = await asyncio.gather(*(ask(pool, sql, f"loop{seed}") for sql in picks))
        return [(end, expected[sql]) for sql, end in zip(picks, ends, strict=True)]

    def on_a_thread(seed: int) -> list:
        pairs = []
        for sql in random.Random(seed).choices(list(expected), k=30):
            try:
                end = ("rows", pool.run(query(concert, sql, f"thread{seed}"))[1])
            except SQLEnvError as error:
                end = (type(error).__name__, str(error))
            pairs.append((end, expected[sql]))
        return pairs

    with ThreadPoolExecutor(6) as callers:
        runs = [callers.submit(asyncio.run, on_a_loop(seed)) for seed in range(3)]
        runs += [callers.submit(on_a_thread, seed) for seed in range(3)]
        pairs = [pair for run in runs for pair in run.result()]
    assert len(pairs) == 390
    assert all(end == wanted for end, wanted in pairs)
    whole(pool, pids)
    assert trouble() == []


def test_loop_callers_in_line_are_served_in_turn_by_client(concert, started):
    pool = started(1)

    async def line_up() -> list[str]:
        finished: list[str] = []

        async def run(name: str, client: str, sql: str = SLOW) -> None:
            await pool.run_async(query(concert, sql, client))
            finished.append(name)

        calls = [asyncio.ensure_future(run("a0", "a", SLOWER))]
        await asyncio.sleep(0.05)  # a0 holds the worker; the rest line up in this order
        for name in ("a1", "a2", "a3", "a4"):
            calls.append(asyncio.ensure_future(run(name, "a")))
            await asyncio.sleep(0.01)
        calls.append(asyncio.ensure_future(run("b", "b")))
        await asyncio.gather(*calls)
        return finished

    assert asyncio.run(line_up()) == ["a0", "a1", "b", "a2", "a3", "a4"]


def test_thread_and_loop_callers_in_line_are_served_in_turn_by_client(concert, started):
    pool = started(1)

    async def line_up() -> list[str]:
        finished: list[str] = []
        loop = asyncio.get_running_loop()

        async def on_loop(name: str, client: str, sql: str = SLOW) -> None:
            await pool.run_async(query(concert, sql, client))
            finished.append(name)

        def on_thread(name: str, client: str) -> None:
            pool.run(query(concert, SLOW, client))
            finished.append(name)

        calls = [asyncio.ensure_future(on_loop("a0", "a", SLOWER))]
        await asyncio.sleep(0.05)
        for name, client, on in [
            ("a1", "a", "thread"),
            ("a2", "a", "loop"),
            ("b1", "b", "loop"),
            ("b2", "b", "thread"),
            ("c", "c", "thread"),
        ]:
            if on == "thread":
                calls.append(loop.run_in_executor(None, on_thread, name, client))
            else:
                calls.append(asyncio.ensure_future(on_loop(name, client)))
            await asyncio.sleep(0.01)
        await asyncio.gather(*calls)
        return finished

    assert asyncio.run(line_up()) == ["a0", "a1", "b1", "c", "a2", "b2"]
