"""A worker process of `env_core.sandbox`: runs one job at a time, within memory limits.

SQLite's hard heap limit makes a statement that needs more than the budget fail cleanly with
"out of memory"; the address-space limit (budget plus room for the interpreter and one result)
stops anything else. A job that leaves the worker holding memory retires it: it answers, then
exits, and the sandbox starts a fresh one.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import resource
import signal
import sqlite3
import traceback
from collections import OrderedDict

from env_core.errors import QueryRejectedError, SQLEnvError, ToolError
from env_core.executor import ReadOnlyExecutor
from env_core.executor_limits import ExecutorLimits
from env_core.sandbox import HEADER, OPEN_DATABASES

# Room beside the budget for the interpreter, the connection caches and one result.
HEADROOM_BYTES = 96 << 20
# A job that leaves this much more resident memory than the worker had at start retires it.
RETIRE_GROWTH_BYTES = 32 << 20
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def main(memory_bytes: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # stopped by the sandbox, or by end of input
    sqlite3.connect(":memory:").execute(f"PRAGMA hard_heap_limit = {memory_bytes}")
    statm = _open_statm()
    _limit_address_space(statm, memory_bytes + HEADROOM_BYTES)
    executors: OrderedDict[tuple, ReadOnlyExecutor] = OrderedDict()
    for database in _receive() or ():  # opened now, before the memory a job may leave is measured
        with contextlib.suppress(SQLEnvError):  # a file gone: its first job will say so
            _executor(executors, *database)
    baseline = _resident(statm)
    _send(("ready", False, ()))
    while (job := _receive()) is not None:
        try:
            status, payload = _run(executors, *job)
            retire = _resident(statm) - baseline > RETIRE_GROWTH_BYTES
        except MemoryError:
            error = QueryRejectedError.over_memory(memory_bytes >> 20)
            status, payload, retire = "error", (type(error).__name__, str(error)), True
        _send((status, retire, payload))
        if retire:
            return


def _run(
    executors: OrderedDict[tuple, ReadOnlyExecutor],
    path: str,
    immutable: bool,
    limit_fields: tuple,
    kind: str,
    argument: str,
    max_rows: int,
) -> tuple[str, tuple]:
    try:
        executor = _executor(executors, path, immutable, limit_fields)
        if kind == "sample":
            result = executor.sample(argument, max_rows)
        else:
            result = executor.query(argument, max_rows)
    except ToolError as error:
        return "error", (type(error).__name__, str(error))
    except SQLEnvError:  # the file cannot be opened: no server paths in the message
        return "error", ("QueryFailedError", "the database cannot be read right now")
    except MemoryError:
        raise
    except Exception:  # a fault of ours: logged, and the worker goes on
        traceback.print_exc()
        return "error", ("QueryFailedError", "the query could not be run")
    return "ok", (
        result.columns,
        result.rows,
        result.truncated,
        result.elapsed_ms,
        result.repeatable,
        result.narrowed,
    )


def _executor(
    executors: OrderedDict[tuple, ReadOnlyExecutor],
    path: str,
    immutable: bool,
    limit_fields: tuple,
) -> ReadOnlyExecutor:
    key = (path, immutable, limit_fields)
    executor = executors.pop(key, None)
    if executor is None:
        executor = ReadOnlyExecutor(
            path,
            ExecutorLimits(*limit_fields),
            immutable=immutable,
            lazy_schema=True,
            statement_cache=False,  # a query's time includes compiling it (see PROVEN)
        )
        if len(executors) >= OPEN_DATABASES:
            executors.popitem(last=False)[1].close()
    executors[key] = executor
    return executor


def _receive() -> tuple | None:
    header = _read(HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    body = _read(size)
    return None if body is None else marshal.loads(body)


def _read(size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = os.read(0, size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _send(reply: tuple) -> None:
    body = marshal.dumps(reply)
    data = HEADER.pack(len(body)) + body
    try:
        while data:
            data = data[os.write(1, data) :]
    except BrokenPipeError:  # the server has gone: nobody is left to answer
        os._exit(0)


def _open_statm() -> int | None:
    """/proc/self/statm, kept open: read again with `pread`, it costs ~3 µs a job, where
    opening it each time cost ~25."""
    try:
        return os.open("/proc/self/statm", os.O_RDONLY)
    except OSError:  # no /proc (macOS)
        return None


def _statm(statm: int, field: int) -> int:
    """A field of /proc/self/statm in bytes (0: address space, 1: resident)."""
    return int(os.pread(statm, 128, 0).split()[field]) * PAGE_BYTES


def _resident(statm: int | None) -> int:
    if statm is None:  # the peak, in bytes on macOS
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return _statm(statm, 1)


def _limit_address_space(statm: int | None, extra: int) -> None:
    if statm is None:  # not enforceable here: SQLite's heap limit still holds
        return
    try:
        limit = _statm(statm, 0) + extra
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (OSError, ValueError):  # a lower hard limit is already set
        pass
