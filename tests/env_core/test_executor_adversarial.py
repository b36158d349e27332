"""The adversarial corpus (tests/env_core/adversarial.py) against real Spider databases.

Every attack must be refused with a clear ToolError, stopped by its deadline, or capped; the
executor must answer a normal query right after it; and when the module has run, every Spider
`*.sqlite` file must be byte-for-byte what it was, with no new file beside it. The Spider files
are root-owned but the tests may run as root, so file permissions prove nothing: hashes do.
"""

import hashlib
import re
import sqlite3
import time
from pathlib import Path

import pytest
from adversarial import (
    ATTACKS,
    BAD_SAMPLE_SIZES,
    BLOB_MARKER,
    CELL_MARKER,
    CONCERT,
    NOT_ALLOWED,
    SIZE_LIMIT,
    TABLE_ARGUMENTS,
    TIME_LIMIT,
    WORLD,
    Attack,
    TableArgument,
    snapshot,
)

from env_core import errors, render
from env_core.errors import (
    InvalidArgumentError,
    QueryFailedError,
    QueryRejectedError,
    QueryTimeoutError,
    ToolError,
)
from env_core.executor import ReadOnlyExecutor
from env_core.executor_limits import ExecutorLimits
from env_core.render import QueryResult

TIMEOUT_S = 0.5
DEADLINE_MARGIN = 3  # a stopped query must end within 3x its deadline, on a noisy 2-core box
LIMITS = ExecutorLimits(timeout_s=TIMEOUT_S)
HEALTH_CHECKS = {
    CONCERT: ("SELECT count(*) FROM singer", 6),
    WORLD: ("SELECT count(*) FROM city", 4079),
}
OUTCOME_ERRORS = {
    "rejected": QueryRejectedError,
    "failed": QueryFailedError,
    "stopped": QueryTimeoutError,
}


@pytest.fixture(scope="module")
def database_dir(spider_dir: Path) -> Path:
    return spider_dir / "database"


@pytest.fixture(scope="module", autouse=True)
def spider_before(database_dir: Path) -> tuple[dict[str, str], frozenset[str]]:
    """Taken before the first test of this module runs (autouse, module scope)."""
    before = snapshot(database_dir)
    assert len(before[0]) >= 160, "expected the 163 Spider databases"
    return before


@pytest.fixture(scope="module")
def executors(database_dir: Path):
    opened = {
        db: ReadOnlyExecutor(database_dir / db / f"{db}.sqlite", LIMITS) for db in HEALTH_CHECKS
    }
    yield opened
    for executor in opened.values():
        executor.close()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("adversarial")


def run(executor: ReadOnlyExecutor, sql: str) -> tuple[QueryResult | ToolError, float]:
    """The outcome, and the CPU seconds the call spent (the executor runs in this thread): its
    cost, whatever else the machine is running."""
    started = time.thread_time()
    try:
        outcome: QueryResult | ToolError = executor.query(sql)
    except ToolError as error:
        outcome = error
    return outcome, time.thread_time() - started


def assert_healthy(executor: ReadOnlyExecutor, db: str) -> None:
    sql, expected = HEALTH_CHECKS[db]
    assert executor.query(sql).rows == ((expected,),)


def assert_capped(result: QueryResult, limits: ExecutorLimits) -> None:
    cap = limits.max_cell_chars + len(f"...[{limits.max_value_bytes * 2} more chars]")
    cells = [cell for row in result.rows for cell in row if isinstance(cell, str)]
    assert all(len(cell) <= cap for cell in cells)
    assert sum(map(len, cells)) <= limits.max_result_chars


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.id for attack in ATTACKS])
def test_attack(attack: Attack, executors, database_dir: Path, scratch: Path) -> None:
    executor = executors[attack.db]
    fill = {"database_dir": str(database_dir), "tmp": str(scratch)}
    outcome, elapsed = run(executor, attack.render(attack.sql, **fill))

    if attack.outcome in OUTCOME_ERRORS:
        assert isinstance(outcome, OUTCOME_ERRORS[attack.outcome]), outcome
        assert attack.phrase in str(outcome)
    elif attack.outcome == "capped":
        if isinstance(outcome, ToolError):
            # Refused for size, or because the function used to build the value is denied.
            assert isinstance(outcome, QueryRejectedError), outcome
            assert SIZE_LIMIT in str(outcome) or NOT_ALLOWED in str(outcome)
        else:
            assert attack.phrase in (CELL_MARKER, BLOB_MARKER), f"expected a refusal: {outcome}"
            assert attack.phrase in outcome.rows[0][0]
            assert_capped(outcome, executor.limits)
    else:
        assert attack.outcome == "answered"
        assert isinstance(outcome, QueryResult), outcome
        assert outcome.rows[0][0] == attack.expected

    # Refusals are immediate; only runaway queries may use (a margin over) the deadline.
    assert elapsed < TIMEOUT_S * DEADLINE_MARGIN, f"took {elapsed:.2f} s"
    if attack.creates:
        assert not Path(attack.render(attack.creates, **fill)).exists()
    assert_healthy(executor, attack.db)


def test_corpus_is_large_and_named_uniquely() -> None:
    assert len(ATTACKS) >= 45
    assert len({attack.id for attack in ATTACKS}) == len(ATTACKS)
    assert {attack.outcome for attack in ATTACKS} == {
        "rejected",
        "failed",
        "stopped",
        "capped",
        "answered",
    }


def test_time_limit_message_is_clear(executors) -> None:
    with pytest.raises(QueryTimeoutError, match=TIME_LIMIT) as caught:
        executors[WORLD].query("SELECT count(*) FROM city a, city b, city c")
    assert "0.5 s" in str(caught.value) and "LIMIT" in str(caught.value)


def test_rejection_names_the_denied_action(executors) -> None:
    with pytest.raises(QueryRejectedError) as caught:
        executors[CONCERT].query("DELETE FROM singer")
    assert re.search(r"not allowed: DELETE singer\b", str(caught.value))
    assert "read-only SELECT" in str(caught.value)


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("DROP TABLE singer", "DROP (a change to the schema)"),
        ("CREATE TABLE copied AS SELECT * FROM singer", "CREATE (a change to the schema)"),
        ("CREATE TEMP VIEW v AS SELECT 1", "CREATE (a change to the schema)"),
    ],
)
def test_a_schema_change_is_refused_by_its_own_name(executors, sql, named) -> None:
    """SQLite first asks to write the table holding the schema: the refusal named that
    ("DELETE sqlite_master" for a DROP TABLE) rather than what the agent wrote."""
    with pytest.raises(QueryRejectedError) as caught:
        executors[CONCERT].query(sql)
    assert f"not allowed: {named}." in str(caught.value)
    assert "sqlite_master" not in str(caught.value)


@pytest.mark.parametrize("method", ["describe", "sample"])
@pytest.mark.parametrize("argument", TABLE_ARGUMENTS, ids=[a.id for a in TABLE_ARGUMENTS])
def test_table_argument(argument: TableArgument, method: str, executors) -> None:
    executor = executors[CONCERT]
    call = getattr(executor, method)
    if argument.resolves_to is not None:
        result = call(argument.table)
        if method == "describe":
            assert result.name == argument.resolves_to
        else:
            assert result.columns[0] == "Singer_ID" and len(result.rows) == 5
    else:
        with pytest.raises(getattr(errors, argument.error)) as caught:
            call(argument.table)
        message = str(caught.value)
        assert argument.phrase in message
        assert len(message) < 400, "the echoed name must be shortened"
        if argument.error == "UnknownTableError":
            assert "tables are: concert, singer, singer_in_concert, stadium" in message
    assert_healthy(executor, CONCERT)


@pytest.mark.parametrize("n", BAD_SAMPLE_SIZES, ids=repr)
def test_sample_refuses_bad_sizes(n, executors) -> None:
    with pytest.raises(InvalidArgumentError, match="whole number"):
        executors[CONCERT].sample("singer", n)


@pytest.mark.parametrize("n", [1, 20, 21, 10**18])
def test_sample_caps_large_sizes(n, executors) -> None:
    result = executors[WORLD].sample("city", n)
    assert len(result.rows) == min(n, LIMITS.max_sample_rows)


def test_hostile_table_name_is_quoted_not_pasted(tmp_path: Path) -> None:
    """A real table whose name is an injection is read as a name; nothing else happens."""
    hostile = 'we"ird; DROP TABLE victim; --'
    quoted = '"' + hostile.replace('"', '""') + '"'
    path = tmp_path / "hostile.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE victim(x)")
        connection.execute("INSERT INTO victim VALUES (1)")
        connection.execute(f"CREATE TABLE {quoted} (v TEXT)")
        connection.execute(f"INSERT INTO {quoted} VALUES ('ok')")
    connection.close()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()

    executor = ReadOnlyExecutor(path, LIMITS)
    assert executor.describe(hostile.upper()).name == hostile
    assert executor.sample(hostile).rows == (("ok",),)
    assert executor.query("SELECT count(*) FROM victim").rows == ((1,),)
    executor.close()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_invalid_utf8_text_is_decoded_with_replacement(tmp_path: Path) -> None:
    path = tmp_path / "bad_utf8.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT)")
        connection.execute("INSERT INTO t VALUES (1, CAST(x'ff41' AS TEXT)), (2, 'fine')")
    connection.close()

    executor = ReadOnlyExecutor(path, LIMITS)
    assert executor.query("SELECT name FROM t ORDER BY id").rows == (("\ufffdA",), ("fine",))
    assert executor.sample("t").rows == ((1, "\ufffdA"), (2, "fine"))
    assert executor.query("SELECT CAST(x'c328' AS TEXT)").rows == (("\ufffd(",),)
    # Bad text in a later row than the first is replaced too.
    assert executor.query("SELECT name FROM t ORDER BY id DESC").rows == (("fine",), ("\ufffdA",))
    # The fallback decoder is per call: the next query gets ordinary text again.
    assert executor.query("SELECT 'é'").rows == (("é",),)
    # An error that merely names "decode" is an ordinary SQL error.
    with pytest.raises(QueryFailedError, match="no such column: decode"):
        executor.query("SELECT decode FROM t")
    executor.close()


# --- uninterruptible function calls ---------------------------------------------------------
# One SQL function call runs in C without reaching a VDBE jump, so the progress handler (the
# deadline) cannot fire inside it, nor between the calls of one row's straight-line code. The
# value-size and LIKE-pattern limits, the SQL length limit and the denied printf/format keep
# such work bounded: huge arguments are refused, and the worst row within the limits overruns
# the deadline by well under a second.

SHORT_TIMEOUT_S = 0.2
HUGE_ARGUMENTS = {
    # SQLite 3.40's printf('%.*c') loops once per repeat even after hitting SQLITE_LIMIT_LENGTH.
    "printf_char_repeat_loop": "SELECT printf('%.*c', 250000000, 'x') IS NULL",
    # LIKE/GLOB backtracking: ~1M-char subject x 1,000-char pattern, in one call.
    "like_backtracking": "SELECT hex(zeroblob(499999)) LIKE '%' || hex(zeroblob(500)) || '1'",
    # instr()/replace() search is O(haystack x needle) memcmp, in one call.
    "instr_quadratic_search": "SELECT instr(hex(zeroblob(499999)), hex(zeroblob(25000)) || '1')",
}
LARGEST_ALLOWED = "WITH s(a, b) AS (SELECT hex(zeroblob(9999)), {needle}) SELECT {calls} FROM s"
WORST_ROWS = {
    "instr_row": LARGEST_ALLOWED.format(
        needle="hex(zeroblob(2500)) || '1'", calls=", ".join(["instr(a, b)"] * 300)
    ),
    "like_row": LARGEST_ALLOWED.format(
        needle="'%' || hex(zeroblob(49)) || '1'", calls=", ".join(["a LIKE b"] * 300)
    ),
    "replace_row": LARGEST_ALLOWED.format(
        needle="hex(zeroblob(2500)) || '1'", calls=", ".join(["replace(a, b, 'x')"] * 300)
    ),
}


def short_deadline_executor(database_dir: Path) -> ReadOnlyExecutor:
    path = database_dir / CONCERT / f"{CONCERT}.sqlite"
    return ReadOnlyExecutor(path, ExecutorLimits(timeout_s=SHORT_TIMEOUT_S))


@pytest.mark.parametrize("sql", HUGE_ARGUMENTS.values(), ids=HUGE_ARGUMENTS.keys())
def test_huge_function_arguments_are_refused(sql: str, database_dir: Path) -> None:
    executor = short_deadline_executor(database_dir)
    outcome, elapsed = run(executor, sql)
    executor.close()
    assert isinstance(outcome, QueryRejectedError), outcome
    assert elapsed < SHORT_TIMEOUT_S * DEADLINE_MARGIN, f"took {elapsed:.2f} s"


@pytest.mark.parametrize("sql", WORST_ROWS.values(), ids=WORST_ROWS.keys())
def test_the_costliest_row_within_the_limits_is_stopped(sql: str, database_dir: Path) -> None:
    executor = short_deadline_executor(database_dir)
    outcome, elapsed = run(executor, sql)
    executor.close()
    assert isinstance(outcome, QueryTimeoutError), outcome
    assert elapsed < SHORT_TIMEOUT_S + 2.0, f"took {elapsed:.2f} s"


# One row of 1,990 texts of 600 characters: ~1.2 million characters.
ONE_WIDE_ROW = (
    "WITH s(h) AS (SELECT hex(zeroblob(300))) SELECT " + ", ".join(["h"] * 1990) + " FROM s"
)


def test_one_wide_row_stays_within_the_result_cap(executors) -> None:
    outcome, _ = run(executors[CONCERT], ONE_WIDE_ROW)
    if isinstance(outcome, ToolError):
        return
    shown = sum(len(cell) for row in outcome.rows for cell in row)
    assert shown <= LIMITS.max_result_chars, f"{shown:,} chars returned in one row"


def test_a_row_cut_to_fit_says_so_rather_than_that_more_rows_exist(executors) -> None:
    """Its one row is all there is: a LIMIT would not help, fewer or shorter columns would."""
    result = executors[CONCERT].query(ONE_WIDE_ROW)
    note = render.rows_text(result).splitlines()[-1]
    assert result.truncated and result.narrowed
    assert note == "(1 row shown, its values cut short to fit: select fewer columns)", note
    whole = executors[CONCERT].query("SELECT name FROM singer")
    assert not whole.narrowed and render.rows_text(whole).endswith("rows)")


# Twelve columns with names of 481 characters, read 64 times over: 768 names, ~370,000
# characters, from 6,350 characters of SQL.
LONG_NAMES = (
    "WITH t AS (SELECT "
    + ", ".join(f'{i} AS "{"n" * 480}{i % 10}"' for i in range(12))
    + ") SELECT * FROM "
    + ", ".join(f"t AS t{i}" for i in range(64))
)


def test_column_names_count_toward_the_result_cap(executors) -> None:
    """Names past half the budget are cut to equal shares; every column is still shown."""
    result = executors[CONCERT].query(LONG_NAMES)
    names = sum(map(len, result.columns))
    assert names <= LIMITS.max_result_chars // 2, f"{names:,} chars of column names"
    assert len(result.columns) == 768 and result.rows == (tuple(range(12)) * 64,)
    assert all(name.startswith("n" * 20) and name.endswith("…") for name in result.columns)
    text = render.rows_text(result)
    assert len(text) <= LIMITS.max_result_chars, f"{len(text):,} chars of text"


def repeated(value: str, rows: int, columns: int = 1990) -> str:
    """`rows` rows of one value in `columns` columns, from ~6,000 characters of SQL."""
    return (
        f"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < {rows}), "
        f"s(v) AS (SELECT {value}) SELECT " + ", ".join(["v"] * columns) + " FROM r, s"
    )


# Cells that cost the budget little but show long: an empty text shows its separator, a
# number its digits, a control character its escape, a NULL its name.
SHOWN_LONGER = {
    "empty text": "''",
    "one letter": "'x'",
    "long float": "-1.2345678901234567e-300",
    "long integer": "-1234567890123456789",
    "control characters": "char(1, 2, 3, 4, 5, 6, 7, 8)",
    "bars": "'||||||||'",
    "null": "NULL",
}


@pytest.mark.parametrize("value", SHOWN_LONGER.values(), ids=SHOWN_LONGER.keys())
@pytest.mark.parametrize("max_rows", [20, 1000])
def test_a_result_shows_at_most_its_budget_whatever_its_cells(
    value: str, max_rows: int, database_dir
):
    """The budget counts what the text shows: with 1,000 rows allowed, empty texts counted as
    nothing had filled ~6,000,000 characters."""
    limits = ExecutorLimits(timeout_s=TIMEOUT_S, max_rows=max_rows)
    executor = ReadOnlyExecutor(database_dir / CONCERT / f"{CONCERT}.sqlite", limits)
    try:
        result = executor.query(repeated(value, max_rows))
    finally:
        executor.close()
    text = render.rows_text(result)
    assert result.rows and len(text) <= limits.max_result_chars, f"{len(text):,} chars of text"


# --- must stay last: the corpus has run --------------------------------------------------------


def test_spider_files_unchanged_after_corpus(database_dir: Path, spider_before) -> None:
    hashes_before, files_before = spider_before
    hashes_after, files_after = snapshot(database_dir)
    assert sorted(files_after - files_before) == [], "new files appeared next to the databases"
    assert sorted(files_before - files_after) == [], "files disappeared"
    changed = [name for name, digest in hashes_before.items() if hashes_after[name] != digest]
    assert changed == []
