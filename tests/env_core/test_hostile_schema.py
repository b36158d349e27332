"""Reading a user's schema runs no SQL from the file, counts rows within the deadline, keeps
one schema per file, and resolves table names the way SQLite does."""

from __future__ import annotations

import gc
import json
import sqlite3
import subprocess
import sys
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from adversarial import cte_chain

from env_core.errors import UnknownTableError
from env_core.executor import ReadOnlyExecutor
from env_core.executor_limits import ExecutorLimits
from env_core.render import schema_text
from sqlenv_mcp.explorer import listing_text

REPOSITORY = Path(__file__).resolve().parents[2]
ENDLESS_VIEW = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"
# Preparing it expands to 2**24 reads of the first CTE: gigabytes, before any row.
EXPLODING_VIEW = cte_chain(24).replace("SELECT count(*) FROM", "SELECT x FROM")
SMALL_VIEW = "SELECT 1 AS x UNION ALL SELECT 2"
FTS5 = "CREATE VIRTUAL TABLE ft USING fts5(x, content='v', content_rowid='x')"
FTS4 = "CREATE VIRTUAL TABLE ft USING fts4(content='v', x)"


def database(path: Path, view: str, virtual: str) -> Path:
    """A plain table, a view `v` and a virtual table `ft` over it."""
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE plain(a, b)")
    connection.execute("INSERT INTO plain VALUES (1, 'x')")
    connection.execute(f"CREATE VIEW v AS {view}")
    connection.execute(virtual)
    connection.commit()
    connection.close()
    return path


def respell(path: Path, name: str, words: str, spelled: str) -> Path:
    """Rewrite the first words of a table's stored SQL, as `PRAGMA writable_schema` allows."""
    with sqlite3.connect(path) as writer:
        writer.execute("PRAGMA writable_schema = ON")
        writer.execute(
            "UPDATE sqlite_master SET sql = replace(sql, ?, ?) WHERE name = ?",
            (words, spelled, name),
        )
    writer.close()
    return path


# --- nothing from the file's schema runs in the server process ----------------------------------

TIMEOUT_S = 0.5
# Opens the file as explorer mode does, in a child process that cannot take the machine down
# if the schema read ran the file's SQL again: 1 GiB of address space, and killed after 20 s.
CHILD = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from pathlib import Path
from env_core.errors import ToolError
from env_core.executor import ReadOnlyExecutor
from env_core.executor_limits import ExecutorLimits
from env_core.render import schema_text
from sqlenv_mcp.explorer import listing_text
from env_core.sandbox import Sandbox

sandbox = Sandbox(workers=1)
limits = ExecutorLimits(timeout_s=float(sys.argv[2]))
started = time.monotonic()
executor = ReadOnlyExecutor(Path(sys.argv[1]), limits, immutable=False, sandbox=sandbox)
read_s = time.monotonic() - started
tables = {}
for name in executor.tables:
    schema = executor.describe(name)
    tables[name] = [schema.kind, schema.row_count, schema.computed]
started = time.monotonic()
try:
    sampled = f"{len(executor.sample('ft').rows)} rows"
except ToolError as error:
    sampled = type(error).__name__
sample_s = time.monotonic() - started
sandbox.close()
print(json.dumps({"read_s": read_s, "tables": tables, "text": schema_text(executor.describe("ft")),
                  "sampled": sampled, "sample_s": sample_s}))
"""

HOSTILE = {
    "fts5_over_endless_view": (ENDLESS_VIEW, FTS5, "CREATE VIRTUAL"),
    "fts5_over_exploding_view": (EXPLODING_VIEW, FTS5, "CREATE VIRTUAL"),
    "fts4_over_exploding_view": (EXPLODING_VIEW, FTS4, "CREATE VIRTUAL"),
    "two_spaces_before_virtual": (ENDLESS_VIEW, FTS5, "CREATE  VIRTUAL"),
    "comment_before_virtual": (EXPLODING_VIEW, FTS5, "CREATE /* not a table */ VIRTUAL"),
}


def read_in_child(path: Path) -> dict:
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(path), str(TIMEOUT_S)],
            cwd=REPOSITORY,
            capture_output=True,
            text=True,
            timeout=20,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("reading the schema did not finish in 20 s")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_virtual_table_over_a_hostile_view_is_described_without_reading_it(tmp_path, case):
    view, virtual, spelled = HOSTILE[case]
    path = database(tmp_path / "hostile.sqlite", view, virtual)
    read = read_in_child(respell(path, "ft", "CREATE VIRTUAL", spelled))
    assert read["read_s"] < 1.0
    assert read["tables"]["ft"] == ["virtual table", None, True]
    assert read["tables"]["v"] == ["view", None, True]
    assert read["tables"]["plain"] == ["table", 1, False]
    assert read["text"].startswith(
        "virtual table ft: virtual tables cannot be sampled or queried here\ndefinition:\n  CREATE "
    )
    # Sampling it goes to the sandbox, where reading a virtual table is refused.
    assert read["sampled"] == "QueryRejectedError"
    assert read["sample_s"] < TIMEOUT_S + 1.5


@pytest.mark.parametrize(
    ("table", "words", "spelled", "kind"),
    [
        ("plain", "CREATE TABLE", "create\ttable", "table"),
        ("plain", "CREATE TABLE", "CREATE/* c */TABLE", "table"),
        ("plain", "CREATE TABLE", "CREATE --c\n TABLE", "table"),
        ("ft", "CREATE VIRTUAL", "CREATE  VIRTUAL", "virtual table"),
        ("ft", "CREATE VIRTUAL", "create--c\nvirtual", "virtual table"),
    ],
)
def test_an_entry_is_read_as_what_its_sql_creates(tmp_path, table, words, spelled, kind):
    """SQLite's tokenizer skips any whitespace and comments between the words, and so does
    the schema reader."""
    path = respell(database(tmp_path / "t.sqlite", SMALL_VIEW, FTS5), table, words, spelled)
    executor = ReadOnlyExecutor(path, immutable=False)
    described = executor.describe(table)
    executor.close()
    assert described.kind == kind
    if kind == "table":
        assert ([c.name for c in described.columns], described.row_count) == (["a", "b"], 1)
    else:
        assert (described.row_count, described.computed) == (None, True)
        assert described.definition.startswith(spelled)


# --- row counts are bounded by the deadline -----------------------------------------------------


def numbers(path: Path, rows: int) -> Path:
    with sqlite3.connect(path) as writer:
        writer.execute("CREATE TABLE numbers(n INTEGER PRIMARY KEY)")
        writer.execute(
            "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < ?) "
            "INSERT INTO numbers SELECT n FROM c",
            (rows,),
        )
    writer.close()
    return path


def test_a_table_too_large_to_count_in_time_has_no_row_count(tmp_path):
    # A deadline no count can meet stands in for a table of many gigabytes.
    path = numbers(tmp_path / "large.sqlite", 100_000)
    executor = ReadOnlyExecutor(path, ExecutorLimits(timeout_s=1e-9))
    described = executor.describe("numbers")
    assert described.row_count is None
    assert [c.name for c in described.columns] == ["n"]
    assert schema_text(described).startswith("table numbers: too many rows to count in time\n")
    # The explorer's list_tables says it in the same words.
    assert listing_text({"large": {"numbers": described}}) == (
        "large: numbers (too many rows to count in time)"
    )
    executor.close()


def test_a_table_counted_in_time_has_its_row_count(tmp_path):
    executor = ReadOnlyExecutor(numbers(tmp_path / "large.sqlite", 100_000))
    assert executor.describe("numbers").row_count == 100_000
    executor.close()


# --- one schema per file ------------------------------------------------------------------------


def test_the_schema_of_a_changed_file_is_let_go(tmp_path):
    path = numbers(tmp_path / "live.sqlite", 10)
    executor = ReadOnlyExecutor(path, immutable=False)
    first = weakref.ref(executor.describe("numbers"))
    for version in range(3):
        time.sleep(0.01)  # a modification time the last read cannot share
        with sqlite3.connect(path) as writer:
            writer.execute(f"CREATE TABLE added_{version}(x)")
        writer.close()
        assert f"added_{version}" in executor.tables
    gc.collect()
    assert first() is None, "the schema read before the file changed is still held"
    executor.close()


# --- table names --------------------------------------------------------------------------------


@pytest.fixture
def odd_names(tmp_path) -> Iterator[ReadOnlyExecutor]:
    path = tmp_path / "names.sqlite"
    names = ["straße", "STRASSE", "[weird]", "weird", " padded", '"quoted"', "ärger"]
    with sqlite3.connect(path) as writer:
        for width, name in enumerate(names, start=1):
            columns = ", ".join(f"c{i}" for i in range(width))
            quoted = '"' + name.replace('"', '""') + '"'
            writer.execute(f"CREATE TABLE {quoted}({columns})")
    writer.close()
    executor = ReadOnlyExecutor(path)
    yield executor
    executor.close()


@pytest.mark.parametrize("name", ["straße", "STRASSE", "[weird]", "weird", " padded", '"quoted"'])
def test_an_exact_name_resolves_to_its_own_table(odd_names, name: str):
    assert odd_names.describe(name).name == name
    assert odd_names.sample(name).columns == tuple(c.name for c in odd_names.describe(name).columns)


@pytest.mark.parametrize(
    ("name", "table"),
    [
        ("Straße", "straße"),  # ASCII letters fold, as in SQLite
        ("strasse", "STRASSE"),  # "ß" is not "ss" to SQLite
        ("[WEIRD]", "[weird]"),  # the name as given, before anything is stripped
        ("  WEIRD ", "weird"),
        (" PADDED", " padded"),
        ('"QUOTED"', '"quoted"'),
    ],
)
def test_other_names_resolve_as_sqlite_reads_them(odd_names, name: str, table: str):
    assert odd_names.resolve_table(name) == table


def test_letters_outside_ascii_do_not_fold(odd_names):
    with pytest.raises(UnknownTableError, match="no such table: ÄRGER; tables are: "):
        odd_names.describe("ÄRGER")
