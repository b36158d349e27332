"""Agent SQL runs in worker processes that the operating system bounds.

SQLite's progress handler only runs while a statement steps, yet some short statements take
seconds and gigabytes to *prepare*: chained CTEs each read twice expand exponentially, and so
does subquery flattening that doubles an expression at every level. No in-process hook stops
that, and a thread cannot be killed. A worker process can: each runs one statement at a time
under SQLite's hard heap limit and an address-space limit, is killed when it overruns its
deadline by `GRACE_S`, and is replaced when a call leaves it holding memory. So every call is
bounded in time and memory, and all calls together by `workers` x (worker + budget).

A call's `Work` (see `ReadOnlyExecutor.query_work`) is a generator that yields the jobs it
needs run and receives their results; `finish` and `finish_async` drive it, blocking a thread
or awaiting the event loop (no thread hop, but for a job that waited in line for a worker: see
`_LoopWaiter`).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import marshal
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from env_core import errors
from env_core.errors import QueryRejectedError, QueryTimeoutError, ServerBusyError, SQLEnvError

if TYPE_CHECKING:
    from env_core.executor_limits import ExecutorLimits

log = logging.getLogger(__name__)

# How long past its own deadline a worker may run before it is killed.
GRACE_S = 0.5
# How many of its time limits a job may wait in line for a worker (see `waiting_limit`).
WAITING_RUNS = 10
STARTUP_S = 30.0
# After a worker failed to start, how long calls wait for the workers left rather than try to
# start another (the process may be at its limit of processes: each try fails and logs).
START_RETRY_S = 1.0
NO_WORKER_STARTS = (
    "no SQL worker process could be started (see the server's log): queries that need one are "
    "refused until one can"
)
# Databases a worker keeps open (~0.1 MiB each on a small file): under many sessions its calls
# span many databases, and reopening one costs more than the query. A connection whose cache
# grows past the worker's retiring growth retires it like any other memory.
OPEN_DATABASES = 64
# How long a worker that closed its output mid-job is given to report how it ended.
ENDING_S = 0.1
# The names of a thread that reads a job's reply for a caller on an event loop, and of one
# that starts a worker.
REPLY_THREAD = "sandbox reply"
STARTER_THREAD = "sandbox worker start"
HEADER = struct.Struct("<I")
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
_WORKER_MAIN = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from env_core.sandbox_worker import main; main(int(sys.argv[2]))"
)


@dataclass(frozen=True)
class Job:
    """One statement for a worker: `kind` is "query" (agent SQL) or "sample" (a table)."""

    path: str
    immutable: bool
    limits: ExecutorLimits
    kind: str
    argument: str
    max_rows: int
    # Who the job is for: jobs waiting for a worker are served in turn by client.
    client: str | None = None

    def encode(self) -> bytes:
        database = _database(self.path, self.immutable, self.limits)
        return marshal.dumps((*database, self.kind, self.argument, self.max_rows))


# A worker's connection, as a job names it: its file, whether the file never changes, and the
# fields of its limits.
Database = tuple[str, bool, tuple]


def _database(path: str, immutable: bool, limits: ExecutorLimits) -> Database:
    return path, immutable, _fields(limits)


@functools.cache
def _fields(limits: ExecutorLimits) -> tuple:
    return dataclasses.astuple(limits)


Result = TypeVar("Result")
# What a worker sends back for a job: the fields of a `render.QueryResult`.
Rows = tuple
# A call's work: it yields (runner, job) pairs, receives each job's rows and returns its result.
# The runner is the `Sandbox`, or a `SharedRun` of the same job made by another call, which
# gives its result instead.
Work = Generator[tuple["Sandbox | SharedRun", Job], Any, Result]


class SharedRun:
    """A job another call is running for the same answer: its result, once it has it, goes
    to every call that waits for it, or None when it cannot be shared (the job failed, or
    its call was given up) and each waiting call runs the job itself. Waiting is bounded by
    the job, which the sandbox bounds.

    Every statement run in the sandbox makes one, and most are waited for by no other call:
    the future the waiting calls block on is made by the first of them (a future made and
    settled took 2.4 µs in a loop, a shared run that no call waits for now takes 1.0)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shared = False
        self._result: Any = None
        self._outcome: concurrent.futures.Future[Any] | None = None

    def share(self, result: Any) -> None:
        with self._lock:
            self._shared, self._result = True, result
            outcome = self._outcome
        if outcome is not None:
            outcome.set_result(result)

    def run(self, _job: Job) -> Any:
        return self._waited().result()

    async def run_async(self, _job: Job) -> Any:
        # Shielded: one waiting call cancelled must not cancel the outcome for the others.
        return await asyncio.shield(asyncio.wrap_future(self._waited()))

    def _waited(self) -> concurrent.futures.Future[Any]:
        """The outcome to wait for, made by the first call that waits (settled already if the
        result was shared before)."""
        with self._lock:
            if self._outcome is None:
                self._outcome = concurrent.futures.Future()
                if self._shared:
                    self._outcome.set_result(self._result)
            return self._outcome


def finish(work: Work[Result]) -> Result:
    """Drive a call to its end in this thread."""
    try:
        sandbox, job = next(work)
        while True:
            try:
                outcome = sandbox.run(job)
            except SQLEnvError as error:
                sandbox, job = work.throw(error)
            else:
                sandbox, job = work.send(outcome)
    except StopIteration as done:
        return done.value
    finally:
        work.close()


async def finish_async(work: Work[Result]) -> Result:
    """Drive a call to its end on the running event loop."""
    try:
        sandbox, job = next(work)
        while True:
            try:
                outcome = await sandbox.run_async(job)
            except SQLEnvError as error:
                sandbox, job = work.throw(error)
            else:
                sandbox, job = work.send(outcome)
    except StopIteration as done:
        return done.value
    finally:
        work.close()  # a cancelled call ends its generator, which frees the episode


class Worker:
    """One worker process: jobs go to its stdin, replies come from its stdout."""

    def __init__(self, memory_bytes: int, databases: tuple[Database, ...] = ()) -> None:
        """`databases`: the connections it opens before it reports ready."""
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WORKER_MAIN, _PACKAGE_ROOT, str(memory_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C in the terminal is for the server alone
        )
        self._input = self.process.stdin.fileno()
        self.output = self.process.stdout.fileno()
        self._buffer = bytearray()
        self.send(marshal.dumps(databases))

    def send(self, payload: bytes) -> None:
        data = HEADER.pack(len(payload)) + payload
        while data:
            data = data[os.write(self._input, data) :]

    def wait_reply(self, timeout_s: float) -> bytes | None:
        """The next reply, or None if it did not come within `timeout_s` (a reply already
        there is taken even when no time is left)."""
        deadline = time.monotonic() + timeout_s
        poller = select.poll()
        poller.register(self.output, select.POLLIN)
        while True:
            left = max(0.0, deadline - time.monotonic())
            if poller.poll(left * 1000) and (reply := self.take_reply()) is not None:
                return reply
            if not left:
                return None

    def take_reply(self) -> bytes | None:
        """Read what has arrived; the reply once it is whole, else None."""
        chunk = os.read(self.output, 1 << 16)
        if not chunk:
            raise EOFError("the worker exited")
        self._buffer += chunk
        if len(self._buffer) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self._buffer)
        if len(self._buffer) < HEADER.size + size:
            return None
        reply = bytes(self._buffer[HEADER.size : HEADER.size + size])
        del self._buffer[: HEADER.size + size]
        return reply

    def ending_signal(self) -> str | None:
        """The name of the signal that ended the process, once it has closed its output; None
        if it exited by itself (or has not ended within `ENDING_S`)."""
        try:
            code = self.process.wait(ENDING_S)
        except subprocess.TimeoutExpired:
            return None
        if code >= 0:
            return None
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"

    @property
    def alive(self) -> bool:
        """False once the process has ended (killed from outside while idle, say)."""
        return self.process.poll() is None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.process.stdin.close()
        self.process.stdout.close()


# A worker running a caller's job, and when the job was sent (its deadline counts from then).
Running = tuple[Worker, float]
# What a waiter is handed: its job running, or the error that kept it from starting.
Grant = Running | SQLEnvError
# Where a job's outcome goes: its rows, or the error it ended with.
Tell = Callable[["Rows | None", "BaseException | None"], None]
WaiterT = TypeVar("WaiterT", bound="_Waiter")


class Sandbox:
    """A pool of up to `workers` worker processes, started when first needed and replaced
    in the background when one is killed or retired, so no caller waits for a start.

    Thread-safe: callers on threads (`run`) and on an event loop (`run_async`) share it.
    """

    def __init__(
        self,
        workers: int = 4,
        memory_mb: int = 64,
        databases: Sequence[Path] = (),
        limits: ExecutorLimits | None = None,
    ) -> None:
        """`databases`: files that never change, which most calls will read under `limits`;
        every worker opens them when it starts (the first `OPEN_DATABASES`), so that a first
        query on each does not pay for opening it (reading its schema, ~0.4 ms)."""
        if workers < 1 or memory_mb < 16:
            raise ValueError("a sandbox needs at least 1 worker and 16 MiB per call")
        self.workers = workers
        self.memory_mb = memory_mb
        opened = databases[:OPEN_DATABASES] if limits is not None else ()
        self._databases = tuple(_database(str(path), True, limits) for path in opened)
        self.killed = 0
        self.jobs = 0  # sent to a worker
        self._lock = threading.Lock()
        self._idle: list[Worker] = []
        self._processes = 0  # running or starting
        self._starting = 0
        self._retry_at = 0.0  # no worker starts for a call before then (see START_RETRY_S)
        self._failing = False  # the last worker to start did not
        self._waiting = _Line()
        self._closed = False

    def run(self, job: Job) -> Rows:
        grant = self._take(lambda: _ThreadWaiter(job))
        if isinstance(grant, _ThreadWaiter):
            running = self._await_thread_grant(grant)
        else:
            running = self._dispatch(grant, job)
        return self._rows(running, job)

    async def run_async(self, job: Job) -> Rows:
        loop = asyncio.get_running_loop()
        grant = self._take(lambda: _LoopWaiter(self, loop, job))
        if isinstance(grant, _LoopWaiter):
            try:
                return await grant.wait()
            except BaseException:
                self._withdraw(grant)
                raise
        worker, sent = self._dispatch(grant, job)
        return await self._watch(worker, job, sent, loop.create_future())

    def warm(self) -> None:
        """Start every worker now, in the background: a server's first queries then do not
        wait for a process to start (~0.3 s each, all at once under load)."""
        with self._lock:
            missing = 0 if self._closed else self.workers - self._processes
            self._processes += missing
        for _ in range(missing):
            self._replace(None)

    def unavailable(self) -> str | None:
        """Why SQL that only a worker may run is refused now, or None: no worker is running
        and the last one to start failed (a limit of processes or open files, no memory).

        For a health check: idle workers that have ended are replaced, and once
        `START_RETRY_S` has passed since a start failed the missing workers are started
        again, so a server that health checks took out of service comes back by itself."""
        idle: list[Worker] = []
        ended: list[Worker] = []
        with self._lock:
            for worker in self._idle:
                (idle if worker.alive else ended).append(worker)
            self._idle = idle
            running = self._processes - self._starting - len(ended)
            failing = self._failing and not running
            retry = failing and time.monotonic() >= self._retry_at
        for worker in ended:
            self._retire(worker)
        if self._closed:
            return "the server is shutting down"
        if retry:
            self.warm()
        return NO_WORKER_STARTS if failing else None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._processes -= len(idle)
            waiting = self._waiting.clear()
        for worker in idle:
            worker.kill()
        for waiter in waiting:
            waiter.deliver(_shutting_down())

    def _take(self, new_waiter: Callable[[], WaiterT]) -> Worker | WaiterT:
        """An idle worker, or else a new waiter in line for one (starting a worker if there
        is room for one, unless one failed to start within `START_RETRY_S`): the waiter is
        handed its job running. Most calls find a worker idle and make no waiter. An idle
        worker that has ended is replaced, not handed out."""
        ended: list[Worker] = []
        try:
            with self._lock:
                if self._closed:
                    raise _shutting_down()
                while self._idle:
                    worker = self._idle.pop()
                    if worker.alive:
                        return worker
                    ended.append(worker)
                start = self._processes < self.workers and time.monotonic() >= self._retry_at
                if not start and not self._processes:
                    raise ServerBusyError.without_workers()
                waiter = new_waiter()
                self._waiting.append(waiter)
                if start:
                    self._processes += 1
        finally:
            for worker in ended:
                self._retire(worker)
        if start:
            self._replace(None)
        return waiter

    def _replace(self, retired: Worker | None) -> None:
        """Kill `retired` (if any) and start a worker, in the background."""
        with self._lock:
            self._starting += 1
        starter = threading.Thread(
            target=self._start, args=(retired,), name=STARTER_THREAD, daemon=True
        )
        try:
            starter.start()
        except RuntimeError as error:  # the process is at its limit of threads or processes
            if retired is not None:
                retired.kill()
            self._not_started(error)

    def _start(self, retired: Worker | None) -> None:
        if retired is not None:
            retired.kill()
        try:
            worker = Worker(self.memory_mb << 20, self._databases)
            if worker.wait_reply(STARTUP_S) is None:
                worker.kill()
                raise OSError("the new worker did not report ready")
        except (OSError, EOFError) as error:
            self._not_started(error)
            return
        with self._lock:
            self._starting -= 1
            self._failing = False
        self._hand_on(worker)

    def _not_started(self, error: BaseException) -> None:
        """A worker could not start: the pool has one fewer until a call, `START_RETRY_S`
        later, starts one again. The jobs in line wait for the workers left; with none left
        they are refused, untaken, rather than left waiting."""
        log.error("cannot start a SQL worker process: %s", error)
        with self._lock:
            self._starting -= 1
            self._processes -= 1
            self._retry_at = time.monotonic() + START_RETRY_S
            self._failing = True
            waiting = [] if self._processes else self._waiting.clear()
        for waiter in waiting:
            waiter.deliver(ServerBusyError.without_workers())

    def _hand_on(self, worker: Worker) -> None:
        """Start the next waiting job on a free worker, else keep it idle. The job is sent
        here rather than by its caller once woken: a caller on a busy event loop wakes
        milliseconds later, and the worker would sit idle meanwhile."""
        with self._lock:
            if self._closed:
                self._processes -= 1
                waiter = None
            elif self._waiting:
                waiter = self._waiting.next()
            else:
                self._idle.append(worker)
                return
        if waiter is None:
            worker.kill()
            return
        try:
            grant: Grant = self._dispatch(worker, waiter.job)
        except SQLEnvError as error:
            grant = error
        waiter.deliver(grant)

    def _dispatch(self, worker: Worker, job: Job) -> Running:
        """Send `job` to `worker`: it runs from now on. A worker that ended since it was last
        seen is replaced, and the call refused untaken: its job never ran."""
        try:
            worker.send(job.encode())
        except OSError:
            self._retire(worker)
            raise ServerBusyError.worker_lost() from None
        except BaseException as error:
            raise self._lost(worker, error) from None
        self.jobs += 1
        return worker, time.monotonic()

    def _retire(self, worker: Worker) -> None:
        with self._lock:
            closed = self._closed
            if closed:
                self._processes -= 1
        if closed:
            worker.kill()
        else:
            self._replace(worker)

    def _lost(self, worker: Worker, error: BaseException) -> BaseException:
        """The worker cannot be trusted any more: replace it; the error to raise. A worker
        that stopped answering mid-job ran out of memory outside SQLite's heap limit (the
        worker's own memory stops answer), unless a signal ended it."""
        ended_by = worker.ending_signal() if isinstance(error, EOFError) else None
        self._retire(worker)
        if ended_by is not None:
            return QueryRejectedError.worker_ended(ended_by)
        if isinstance(error, EOFError | OSError):
            return QueryRejectedError.over_memory(self.memory_mb)
        return error

    def _rows(self, running: Running, job: Job) -> Rows:
        """Wait in this thread for the reply of a job running, and settle it."""
        worker, sent = running
        try:
            reply = worker.wait_reply(_time_left(job, sent))
        except BaseException as error:
            raise self._lost(worker, error) from None
        return self._settle(worker, job, reply)

    def _rows_in_thread(self, running: Running, job: Job, tell: Tell) -> bool:
        """Settle a job running in a thread of its own, and `tell` its outcome; False if no
        thread can start now (the process is at its limit of threads or processes)."""

        def settle() -> None:
            _told(tell, self._rows, running, job)

        try:
            threading.Thread(target=settle, name=REPLY_THREAD, daemon=True).start()
        except RuntimeError:
            return False
        return True

    def _settle(self, worker: Worker, job: Job, reply: bytes | None) -> Rows:
        """A reply as the job's rows or an engine error; the worker goes back or is replaced."""
        if reply is None:
            self.killed += 1
            self._retire(worker)
            raise QueryTimeoutError.after(job.limits.timeout_s)
        status, retire, payload = marshal.loads(reply)
        if retire:  # the job left the worker holding memory: a fresh one takes its place
            self._retire(worker)
        else:
            self._hand_on(worker)
        if status == "error":
            kind, message = payload
            raise getattr(errors, kind, errors.QueryFailedError)(message)
        return payload

    def _watch(
        self, worker: Worker, job: Job, sent: float, outcome: asyncio.Future[Rows]
    ) -> asyncio.Future[Rows]:
        """Wait for the reply on the running loop and settle it in the loop's reader callback:
        the worker is handed its next job there, not once the caller runs again (a loop serving
        many sessions runs all their ready work in between). The outcome goes to `outcome`
        unless it is cancelled: a job nobody waits for any more still runs to its end, which is
        bounded, and its worker goes back to the pool rather than being replaced (a client
        cancelling calls in a loop would otherwise cost a process start each)."""
        loop = asyncio.get_running_loop()

        def stop_waiting() -> None:
            loop.remove_reader(worker.output)
            timer.cancel()

        tell = functools.partial(_resolve, outcome)

        def conclude(reply: bytes | None) -> None:
            stop_waiting()
            _told(tell, self._settle, worker, job, reply)

        def readable() -> None:
            try:
                reply = worker.take_reply()
            except (EOFError, OSError) as error:
                stop_waiting()
                tell(None, self._lost(worker, error))
                return
            if reply is not None:
                conclude(reply)

        def given_up(_outcome: asyncio.Future[Rows]) -> None:
            # The loop may close before the reply comes (asyncio.run ends with its caller), and
            # its reader with it: a thread reads the reply instead and settles the worker.
            if outcome.cancelled() and loop.remove_reader(worker.output):
                timer.cancel()
                if not self._rows_in_thread((worker, sent), job, _nobody):
                    read()  # no thread can start: the loop goes on reading it

        def read() -> None:
            nonlocal timer
            loop.add_reader(worker.output, readable)
            # Ready descriptors are handled before due timers: a reply already there wins.
            timer = loop.call_later(max(0.0, _time_left(job, sent)), conclude, None)

        timer: asyncio.TimerHandle
        read()
        outcome.add_done_callback(given_up)
        return outcome

    def _await_thread_grant(self, waiter: _ThreadWaiter) -> Running:
        """The waiter's job running, once a worker is free (see `_gives_up`)."""
        limit = waiting_limit(waiter.job)
        while not waiter.wait(limit):
            if self._gives_up(waiter):
                raise ServerBusyError.after(limit)
        return waiter.grant()

    def _gives_up(self, waiter: _Waiter) -> bool:
        """Whether a waiter that has waited its `waiting_limit` leaves the line, refused: not
        while a worker is starting (that is no busy server), nor once it has been served."""
        with self._lock:
            return not self._starting and self._waiting.remove(waiter)

    def _withdraw(self, waiter: _LoopWaiter) -> None:
        """A waiter gave up: it leaves the line. A job already handed a worker runs to its
        end all the same, which is bounded, and settles its worker."""
        with self._lock:
            self._waiting.remove(waiter)
        waiter.abandon()


def waiting_limit(job: Job) -> float:
    """How long a job may wait in line for a worker: many times what it may run, so that a
    client's own backlog under heavy load is served, while the line stays bounded whoever
    fills it (served in turn by client, one client holds up another by one job each)."""
    return WAITING_RUNS * job.limits.timeout_s


def _time_left(job: Job, sent: float) -> float:
    return job.limits.timeout_s + GRACE_S - (time.monotonic() - sent)


def _nobody(_rows: Rows | None, _error: BaseException | None) -> None:
    """Where the outcome of a job nobody waits for goes."""


def _told(tell: Tell, rows_of: Callable[..., Rows], *arguments: Any) -> None:
    """`tell` the rows `rows_of(*arguments)` gives, or the error it raises."""
    try:
        rows = rows_of(*arguments)
    except Exception as error:
        tell(None, error)
    else:
        tell(rows, None)


def _resolve(outcome: asyncio.Future[Rows], rows: Rows | None, error: BaseException | None) -> None:
    """Give a loop caller its job's outcome, unless it gave up waiting."""
    if outcome.cancelled():
        return
    if error is not None:
        outcome.set_exception(error)
    else:
        outcome.set_result(rows)


def _shutting_down() -> QueryRejectedError:
    return QueryRejectedError("the server is shutting down; no query can run now")


class _Waiter:
    job: Job

    def deliver(self, grant: Grant) -> None:
        raise NotImplementedError


class _ThreadWaiter(_Waiter):
    def __init__(self, job: Job) -> None:
        self.job = job
        self._event = threading.Event()
        self._grant: Grant | None = None

    def deliver(self, grant: Grant) -> None:
        self._grant = grant
        self._event.set()

    def wait(self, timeout_s: float | None) -> bool:
        """Whether the grant came within `timeout_s` (None: wait for it)."""
        return self._event.wait(timeout_s)

    def grant(self) -> Running:
        if isinstance(self._grant, SQLEnvError):
            raise self._grant
        return self._grant


class _LoopWaiter(_Waiter):
    """Waits on an event loop for its job's rows; deliveries may come from any thread.

    A job that waited in line is handed a worker while the machine is busy: its reply is read
    by a thread of its own, which hands the worker its next job at once. The loop would read
    it only between all its sessions' ready work, milliseconds later under load, and the
    worker would sit idle meanwhile."""

    def __init__(self, sandbox: Sandbox, loop: asyncio.AbstractEventLoop, job: Job) -> None:
        self.job = job
        self._sandbox = sandbox
        self._loop = loop
        self._outcome: asyncio.Future[Rows] = loop.create_future()

    def deliver(self, grant: Grant) -> None:
        if isinstance(grant, SQLEnvError):
            self._tell(None, grant)
        elif not self._sandbox._rows_in_thread(grant, self.job, self._tell):
            # No thread can start: the loop reads the reply, as it reads an idle worker's.
            self._on_loop(self._read, grant)

    def _read(self, running: Running) -> None:
        worker, sent = running
        self._sandbox._watch(worker, self.job, sent, self._outcome)

    def _tell(self, rows: Rows | None, error: BaseException | None) -> None:
        self._on_loop(_resolve, self._outcome, rows, error)

    def _on_loop(self, callback: Callable[..., None], *arguments: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting
            self._loop.call_soon_threadsafe(callback, *arguments)

    def abandon(self) -> None:
        """Nobody waits for the outcome any more: it is dropped when it comes."""
        self._outcome.cancel()

    async def wait(self) -> Rows:
        """The job's rows, once a worker has run it (see `Sandbox._gives_up`)."""
        limit = waiting_limit(self.job)
        while True:
            try:
                return await asyncio.wait_for(asyncio.shield(self._outcome), limit)
            except TimeoutError:
                if self._sandbox._gives_up(self):
                    raise ServerBusyError.after(limit) from None


class _Line:
    """Jobs waiting for a worker, served in turn by client: the next free worker goes to the
    client that has waited longest since it was last served, so one client's many jobs in
    line hold up another client's by at most one job each."""

    def __init__(self) -> None:
        # Insertion order is the turn: a client served goes to the back.
        self._by_client: dict[str | None, collections.deque[_Waiter]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_client)

    def append(self, waiter: _Waiter) -> None:
        self._by_client.setdefault(waiter.job.client, collections.deque()).append(waiter)

    def next(self) -> _Waiter:
        client = next(iter(self._by_client))
        line = self._by_client.pop(client)
        waiter = line.popleft()
        if line:
            self._by_client[client] = line
        return waiter

    def remove(self, waiter: _Waiter) -> bool:
        """Take a waiter out of the line; False if it is not in it (it was served)."""
        line = self._by_client.get(waiter.job.client)
        if line is None or waiter not in line:
            return False
        line.remove(waiter)
        if not line:
            del self._by_client[waiter.job.client]
        return True

    def clear(self) -> list[_Waiter]:
        """Empty the line; the waiters that were in it."""
        waiting = [waiter for line in self._by_client.values() for waiter in line]
        self._by_client = {}
        return waiting
