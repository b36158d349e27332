"""What agent SQL runs in process rather than in the sandbox.

A statement whose compiled program only reads, compares, counts and sorts what it read
(`env_core.programs`) runs in process the first time, on a small file with nothing that expands
when compiled, and what it gathers stays within its deadline and a few MiB; nothing whose
program can grow faster than the time it runs does. Other agent SQL the sandbox has run quickly
on an unchanging file runs in process the next time, and nothing else does: not a statement
that is slow to compile or to run, nor one that calls chance or the clock, nor one on a file
that may change. A statement that takes longer in process than it looked (than its proof said)
twice goes back to the sandbox for good, and a run in process keeps nothing compiled. A proof
holds for its own executor. No result is kept here (`KEPT`), or a statement asked again would
not run at all."""

from __future__ import annotations

import concurrent.futures
import sqlite3
import statistics
import threading
import time
from pathlib import Path

import pytest
from process_memory import MIB, PAGE, PeakRSS

from env_core import programs
from env_core.errors import QueryRejectedError, ToolError
from env_core.executor import ReadOnlyExecutor
from env_core.reuse import KEPT, PROVEN, CallKey
from env_core.sandbox import Sandbox

CONCERT = "concert_singer"
# A function: the sandbox runs it first.
CHEAP = "SELECT Name, Age FROM singer WHERE Age > 30 ORDER BY abs(Age)"
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


BOUNDED = [
    "SELECT count(*) FROM singer",
    "SELECT Name, Age FROM singer WHERE Age BETWEEN 30 AND 40 OR Country IS NULL",
    "SELECT * FROM singer LIMIT 2 OFFSET 1",
    "SELECT max(Age), min(Age), avg(Age), sum(Age), total(Age), count(Name) FROM singer",
    "SELECT s.Name FROM singer AS s JOIN singer_in_concert AS c ON s.Singer_ID = c.Singer_ID",
    "SELECT 1 + 1",
    "SELECT Name FROM singer ORDER BY Age",
    "SELECT Country, count(*) FROM singer GROUP BY Country ORDER BY count(*) DESC LIMIT 1",
    "SELECT DISTINCT Country FROM singer",
    "SELECT count(DISTINCT Country) FROM singer",
    "SELECT Name FROM singer WHERE Age IN (29, 32, 41) ORDER BY Name LIMIT 2 OFFSET 1",
]
GROWING = {
    "sorted by NOCASE": "SELECT Name FROM singer ORDER BY Name COLLATE NOCASE",
    "grouped by RTRIM": "SELECT count(*) FROM singer GROUP BY Country COLLATE RTRIM",
    "distinct by NOCASE": "SELECT DISTINCT Country COLLATE NOCASE FROM singer",
    "a window": "SELECT Name, sum(Age) OVER (ORDER BY Age) FROM singer",
    "a function": "SELECT upper(Name) FROM singer",
    "like": "SELECT Name FROM singer WHERE Name LIKE 'J%'",
    "concatenated": "SELECT Name || Country FROM singer",
    "group_concat": "SELECT group_concat(Name) FROM singer",
    "a subquery": "SELECT Name FROM singer WHERE Age > (SELECT avg(Age) FROM singer)",
    "a union": "SELECT Name FROM singer UNION ALL SELECT Name FROM stadium",
    "a CTE": "WITH s AS (SELECT * FROM singer) SELECT count(*) FROM s",
    "natural": "SELECT count(*) FROM singer NATURAL JOIN singer_in_concert",
    "using": "SELECT count(*) FROM singer JOIN singer_in_concert USING (Singer_ID)",
    "five tables": "SELECT count(*) FROM singer a, singer b, singer c, singer d, singer e",
    "257 columns": "SELECT " + ", ".join(["Age"] * 257) + " FROM singer",
}


@pytest.fixture(autouse=True)
def no_kept_results(monkeypatch):
    monkeypatch.setattr(KEPT, "max_result_bytes", -1)


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


def query_allowing_a_pause(executor: ReadOnlyExecutor, sql: str):
    """The statement's result with the sandbox closed: it runs in process, though a pause of
    the machine's longer than a bounded program's deadline (0.25 ms) may send one call to the
    sandbox, as the engine allows (`PROVEN.MAX_OVERRUNS`)."""
    for _ in range(PROVEN.MAX_OVERRUNS - 1):
        try:
            return executor.query(sql)
        except QueryRejectedError as refusal:
            if "shutting down" not in str(refusal):
                raise
    return executor.query(sql)


@pytest.mark.parametrize("sql", BOUNDED)
def test_a_statement_whose_program_is_bounded_runs_in_process_the_first_time(
    open_executor, sandbox, spider_dir, sql
):
    in_process = ReadOnlyExecutor(spider_dir / "database" / CONCERT / f"{CONCERT}.sqlite")
    expected = in_process.query(sql)
    in_process.close()
    executor = open_executor()
    sandbox.close()
    result = query_allowing_a_pause(executor, sql)
    assert (result.columns, result.rows, result.truncated) == (
        expected.columns,
        expected.rows,
        expected.truncated,
    )


@pytest.mark.parametrize("sql", GROWING.values(), ids=GROWING)
def test_a_statement_whose_program_may_grow_with_the_data_runs_in_the_sandbox_first(
    open_executor, sandbox, sql
):
    assert not runs_without_the_sandbox(open_executor(), sandbox, sql)


def file_of(path: Path, *statements: str) -> Path:
    connection = sqlite3.connect(path)
    for statement in statements:
        connection.execute(statement)
    connection.commit()
    connection.close()
    return path


@pytest.mark.parametrize(
    "statements",
    [
        ["CREATE TABLE t(x)", "CREATE VIEW v AS SELECT x FROM t"],
        ["CREATE TABLE t(x)", "CREATE TABLE g(x, y AS (x * 2))"],
        ["CREATE TABLE t(x)", f"INSERT INTO t VALUES (zeroblob({programs.MAX_FILE_BYTES}))"],
    ],
    ids=["a view", "a generated column", "over the size"],
)
def test_on_a_file_that_expands_when_compiled_or_is_large_new_sql_runs_in_the_sandbox_first(
    tmp_path, sandbox, statements
):
    executor = ReadOnlyExecutor(file_of(tmp_path / "file.sqlite", *statements), sandbox=sandbox)
    try:
        assert not runs_without_the_sandbox(executor, sandbox, "SELECT count(*) FROM t")
    finally:
        executor.close()


def test_a_bloom_filter_sized_by_the_file_runs_in_the_sandbox_first(tmp_path, sandbox, monkeypatch):
    """A file's statistics may say a table holds 10^8 rows: SQLite then zeroes a 10 MB Bloom
    filter in one step (in process: +9.5 MiB resident, 0.6 ms at the median, 20 at p90)."""
    path = file_of(
        tmp_path / "file.sqlite",
        "CREATE TABLE a(x, y)",
        "CREATE TABLE b(x, y)",
        "CREATE INDEX bx ON b(x)",
        "INSERT INTO a VALUES (1, 1)",
        "INSERT INTO b VALUES (1, 5)",
        "ANALYZE",
        "INSERT INTO sqlite_stat1 VALUES ('a', NULL, '1000000000000')",
        "INSERT INTO sqlite_stat1 VALUES ('b', 'bx', '100000000 1')",
    )
    executor = ReadOnlyExecutor(path, sandbox=sandbox)
    in_process = []
    run = executor._run

    def noted_run(sql: str, limit: int, *, deadline_s: float | None = None):
        in_process.append(sql)
        return run(sql, limit, deadline_s=deadline_s)

    monkeypatch.setattr(executor, "_run", noted_run)
    try:
        assert executor.query("SELECT a.y FROM a, b WHERE b.x = a.x AND b.y > 3").rows == ((1,),)
    finally:
        executor.close()
    assert in_process == []


def test_a_record_wider_than_a_row_is_not_bounded():
    """Within 200 characters only `*` names more than 256 columns, and a row of them is
    refused first; a record of as many (of a subquery's, say) is refused as well."""
    record = [(0, "Init", 0, 2, 0, None), (1, "MakeRecord", 1, 257, 300, None)]
    assert not programs.runs_bounded(record)
    assert programs.runs_bounded([record[0], (1, "MakeRecord", 1, 256, 300, None)])


def timed_runs_in_process(executor: ReadOnlyExecutor, monkeypatch) -> list[float]:
    """The milliseconds each run of agent SQL in process takes from now on, as they come."""
    spent = []
    run = executor._run

    def timed_run(sql: str, limit: int, *, deadline_s: float | None = None):
        started = time.perf_counter()
        try:
            return run(sql, limit, deadline_s=deadline_s)
        finally:
            if deadline_s is not None:  # in process rather than in the sandbox
                spent.append((time.perf_counter() - started) * 1000)

    monkeypatch.setattr(executor, "_run", timed_run)
    return spent


WIDE_TEXTS = 190  # rows of 19,000 bytes alike but for their last ten: the file's 3.7 MiB
WORST_GATHERED = {
    "sorted pairs": "SELECT a.rowid FROM t a, t b ORDER BY a.x, b.rowid",
    "every column grouped": "SELECT count(*) FROM t a, t b GROUP BY a.x, a.rowid, b.rowid",
    "distinct pairs": "SELECT DISTINCT a.x, b.rowid FROM t a, t b",
    "a huge offset": "SELECT a.rowid FROM t a, t b ORDER BY a.x LIMIT 1 OFFSET 1000000000",
    "an automatic index": "SELECT count(*) FROM t a JOIN t b ON a.x = b.x",
    "sorted, gathered in time": "SELECT rowid FROM t WHERE rowid <= {n} ORDER BY x",
}


@pytest.fixture(scope="module")
def wide_texts(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("wide") / "wide.sqlite"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE t(x TEXT)")
    texts = [("a" * 18_990 + f"{(i * 7919) % 10**10:010d}",) for i in range(WIDE_TEXTS)]
    connection.executemany("INSERT INTO t VALUES (?)", texts)
    connection.commit()
    connection.close()
    assert path.stat().st_size <= programs.MAX_FILE_BYTES
    return path


@pytest.mark.parametrize("sql", WORST_GATHERED.values(), ids=WORST_GATHERED)
def test_the_worst_a_gathering_statement_holds_in_process_is_a_few_mib_for_its_deadline(
    wide_texts, monkeypatch, sql
):
    """Each run in process (of variants of the statement, so that none is proven or refused
    for its overruns) stops at its deadline or sorts what it gathered just before: a few MiB
    at the peak (3-4 measured) and a step past the deadline (0.2-0.5 ms at the median)."""
    executor = ReadOnlyExecutor(wide_texts, sandbox=Sandbox(workers=1, memory_mb=64))
    executor.sandbox.close()  # what overruns in process is then refused
    variants = [sql.format(n=n) + f" -- {n}" for n in range(1, 61)]
    spent = timed_runs_in_process(executor, monkeypatch)
    try:
        with PeakRSS() as peak:
            for variant in variants:
                try:
                    executor.query(variant)
                except QueryRejectedError as refused:
                    assert "shutting down" in str(refused)
    finally:
        executor.close()
    # Each ran in process, but for a few compiled past the deadline on a loaded machine.
    assert len(spent) >= len(variants) // 2
    assert statistics.median(spent) < 2, [round(ms, 2) for ms in spent]
    assert peak.growth_mib < 8


def test_a_bounded_statement_slower_than_it_looked_goes_to_the_sandbox_for_good_the_second_time(
    spider_dir, sandbox, monkeypatch
):
    """975,000 pairs: far over a millisecond in process, well under the deadline in a worker.
    Each of the first tries overruns in process: its run, or (on a loaded machine) already its
    compiling; after the last, it is neither compiled nor run here again."""
    path = spider_dir / "database" / "world_1" / "world_1.sqlite"
    executor = ReadOnlyExecutor(path, sandbox=sandbox)
    tried, overruns = [], []
    run, overran = executor._run, PROVEN.overran

    def noted_run(sql: str, limit: int, *, deadline_s: float | None = None):
        tried.append(deadline_s)
        return run(sql, limit, deadline_s=deadline_s)

    def noted_overrun(key: CallKey) -> None:
        overruns.append(key[1])
        overran(key)

    monkeypatch.setattr(executor, "_run", noted_run)
    monkeypatch.setattr(PROVEN, "overran", noted_overrun)
    pairs = "SELECT count(*) FROM city, country"
    try:
        for _ in range(PROVEN.MAX_OVERRUNS + 1):
            assert executor.query(pairs).rows == ((4079 * 239,),)
    finally:
        executor.close()
    assert overruns == [pairs] * PROVEN.MAX_OVERRUNS
    assert set(tried) <= {programs.DEADLINE_S} and len(tried) <= PROVEN.MAX_OVERRUNS


def test_a_statement_compiled_past_the_deadline_of_a_run_here_is_an_overrun(
    open_executor, monkeypatch
):
    """The authorizer stops compiling past the deadline only while names are read; planning
    and code come after. Past it, the statement goes to the sandbox, and for good the second
    time, like one that overran its run."""
    monkeypatch.setattr(programs, "DEADLINE_S", 1e-9)
    monkeypatch.setattr(PROVEN, "PROOF_MS", -1.0)  # nor proven by its runs in the sandbox
    executor = open_executor()
    sql = "SELECT count(*) FROM singer"
    for _ in range(PROVEN.MAX_OVERRUNS):
        assert executor.query(sql).rows == ((6,),)
    assert not PROVEN.trusted((executor._serial, sql, executor.limits.max_rows, None))


@pytest.mark.parametrize("sql", ["QUERY PLAN SELECT 1", "/* SELECT */ REINDEX"])
def test_only_a_select_is_compiled_to_see_if_it_is_bounded(open_executor, sql):
    """EXPLAIN QUERY PLAN lists no program: read as one, it raised ValueError."""
    with pytest.raises(ToolError):
        open_executor().query(sql)


def test_a_proof_holds_for_its_own_executor_only(open_executor, sandbox):
    """Another episode manager (another assessment) opens its own executor on the file."""
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


def test_a_statement_slower_in_process_than_its_proof_goes_back_to_the_sandbox_for_good(
    open_executor, sandbox, monkeypatch
):
    executor = open_executor()
    counted = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 500) "
    counted += "SELECT count(*) FROM c"
    assert executor.query(counted).rows == ((500,),)
    with monkeypatch.context() as patched:
        patched.setattr(PROVEN, "DEADLINE_S", 1e-9)  # a run in process overruns it
        for _ in range(PROVEN.MAX_OVERRUNS):  # once in process, then in the sandbox
            assert executor.query(counted).rows == ((500,),)
            assert executor.query(counted).rows == ((500,),)
    for _ in range(2):  # quick in the sandbox again, yet not proven again
        assert executor.query(counted).rows == ((500,),)
    assert not runs_without_the_sandbox(executor, sandbox, counted)


def resident_mib() -> float:
    """This process's resident memory (its SQL workers are other processes)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * PAGE / MIB


def test_statements_run_in_process_leave_nothing_compiled_behind(open_executor, monkeypatch):
    """A 600-column SELECT compiles to ~0.25 MiB; the server's statement cache (128) would keep
    128 of them per database."""
    monkeypatch.setattr(PROVEN, "PROOF_MS", 100.0)  # proven whatever this machine's speed
    executor = open_executor()
    columns = ",".join(["1"] * 600)
    before = resident_mib()
    for limit in range(1, 129):
        wide = f"SELECT {columns} LIMIT {limit}"
        executor.query(wide)  # in the sandbox
        assert executor.query(wide).rows == ((1,) * 600,)  # in process
    assert resident_mib() - before < 16


def test_a_run_in_process_stops_near_its_deadline_while_another_thread_is_busy(
    spider_dir, monkeypatch
):
    """The sqlite3 module takes the GIL back for each authorizer call while compiling and for
    each row, and a busy thread may keep it 5 ms each time; compiling never calls the
    progress handler. Runs in process here used to take 80-170 ms to stop."""
    monkeypatch.setattr(PROVEN, "PROOF_MS", 100.0)
    path = spider_dir / "database" / "world_1" / "world_1.sqlite"
    executor = ReadOnlyExecutor(path, sandbox=Sandbox(workers=1, memory_mb=64))
    # Over 200 characters: not compiled in process to prove it, so the sandbox runs each first.
    statements = [
        f"SELECT {'+'.join(['ID'] * 250)} FROM city ORDER BY 1 LIMIT {n}" for n in range(1, 6)
    ]
    spent = timed_runs_in_process(executor, monkeypatch)
    stop = threading.Event()

    def keep_busy() -> None:
        while not stop.is_set():
            sum(range(100))

    busy = threading.Thread(target=keep_busy)
    try:
        for sql in statements:
            executor.query(sql)  # proven in the sandbox
        busy.start()
        for sql in statements:
            executor.query(sql)
    finally:
        stop.set()
        busy.join()
        executor.sandbox.close()
        executor.close()
    assert len(spent) == len(statements)
    assert statistics.median(spent) < 25, [round(ms) for ms in spent]


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
