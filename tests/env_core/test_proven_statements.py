"""Agent SQL the sandbox has run quickly on an unchanging file runs in process the next time,
and nothing else does: not a statement that is slow to compile or to run, nor one that calls
chance or the clock, nor one on a file that may change. A statement that takes longer in
process than its proof said goes back to the sandbox. A proof holds for its own executor."""

from __future__ import annotations

import concurrent.futures

import pytest

from env_core.errors import QueryRejectedError
from env_core.executor import PROVEN, ReadOnlyExecutor
from env_core.sandbox import Sandbox

CONCERT = "concert_singer"
CHEAP = "SELECT Name, Age FROM singer WHERE Age > 30 ORDER BY Age"
# Cheap to run (six rows) and ~60 ms to compile: every join matches columns against all before.
SLOW_TO_COMPILE = "SELECT count(*) FROM " + " NATURAL JOIN ".join(
    f"singer AS s{i}" for i in range(64)
)
SLOW_TO_RUN = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000) "
    "SELECT count(*) FROM c"
)
UNREPEATABLE = [
    "SELECT Name FROM singer WHERE random() % 2 = 0",
    "SELECT Name FROM singer WHERE hex(RANDOMBLOB(1)) > '7F'",
    "SELECT Name FROM singer WHERE strftime('%S', 'now') = '00'",
    "SELECT Name FROM singer WHERE CURRENT_TIMESTAMP > '2000'",
]


@pytest.fixture
def sandbox():
    pool = Sandbox(workers=1, memory_mb=64)
    yield pool
    pool.close()


@pytest.fixture
def open_executor(spider_dir, sandbox):
    opened = []

    def open_executor(*, immutable: bool = True) -> ReadOnlyExecutor:
        path = spider_dir / "database" / CONCERT / f"{CONCERT}.sqlite"
        opened.append(ReadOnlyExecutor(path, immutable=immutable, sandbox=sandbox))
        return opened[-1]

    yield open_executor
    for executor in opened:
        executor.close()


def runs_without_the_sandbox(executor: ReadOnlyExecutor, sandbox: Sandbox, sql: str) -> bool:
    """Whether `sql` still runs once the sandbox is closed (the sandbox ends with it)."""
    sandbox.close()
    try:
        executor.query(sql)
    except QueryRejectedError as error:
        assert "shutting down" in str(error)
        return False
    return True


def test_a_cheap_statement_runs_in_process_once_the_sandbox_ran_it(open_executor, sandbox):
    executor = open_executor()
    first = executor.query(CHEAP)
    assert runs_without_the_sandbox(executor, sandbox, CHEAP)
    again = executor.query(CHEAP)
    assert (again.columns, again.rows) == (first.columns, first.rows)


def test_a_proof_holds_for_its_own_executor_only(open_executor, sandbox):
    """Another session manager (another assessment) opens its own executor on the file."""
    open_executor().query(CHEAP)
    assert not runs_without_the_sandbox(open_executor(), sandbox, CHEAP)


@pytest.mark.parametrize(
    "sql", [SLOW_TO_COMPILE, SLOW_TO_RUN, *UNREPEATABLE], ids=lambda sql: sql[:40]
)
def test_a_statement_not_proven_cheap_always_runs_in_the_sandbox(open_executor, sandbox, sql):
    executor = open_executor()
    for _ in range(3):  # one worker: it has seen the statement before, and compiles it again
        executor.query(sql)
    assert not runs_without_the_sandbox(executor, sandbox, sql)


def test_a_file_that_may_change_runs_everything_in_the_sandbox(open_executor, sandbox):
    executor = open_executor(immutable=False)
    executor.query(CHEAP)
    executor.query(CHEAP)
    assert not runs_without_the_sandbox(executor, sandbox, CHEAP)


def test_a_statement_slower_in_process_than_its_proof_goes_back_to_the_sandbox(
    open_executor, sandbox, monkeypatch
):
    executor = open_executor()
    counted = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 500) "
    counted += "SELECT count(*) FROM c"
    assert executor.query(counted).rows == ((500,),)
    monkeypatch.setattr(PROVEN, "DEADLINE_S", 1e-9)  # every run in process overruns it
    assert executor.query(counted).rows == ((500,),)  # answered by the sandbox
    assert not runs_without_the_sandbox(executor, sandbox, counted)


def at_once(executor: ReadOnlyExecutor, sql: str, calls: int) -> list:
    with concurrent.futures.ThreadPoolExecutor(calls) as pool:
        return list(pool.map(lambda _: executor.query(sql), range(calls)))


def test_calls_of_one_statement_at_once_share_one_run(open_executor):
    results = at_once(open_executor(), SLOW_TO_RUN, 4)
    assert {(r.rows, r.elapsed_ms) for r in results} == {(results[0].rows, results[0].elapsed_ms)}


def test_a_statement_that_calls_chance_is_run_for_each_call(open_executor):
    drawn = "SELECT max(x), random() FROM (" + SLOW_TO_RUN.replace("SELECT count(*)", "SELECT x")
    results = at_once(open_executor(), drawn + ")", 4)
    assert len({result.rows for result in results}) == 4
