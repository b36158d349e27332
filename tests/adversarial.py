"""An adversarial corpus for the read-only executor, kept as data so any door can replay it.

Each `Attack` is one agent-supplied SQL string and the outcome the executor must give:

- ``rejected``: `QueryRejectedError` whose message contains `phrase`;
- ``failed``: `QueryFailedError` whose message contains `phrase`;
- ``stopped``: `QueryTimeoutError` ("time limit") within a small multiple of the deadline;
- ``capped``: either rejected (for size, or because the function building the value is not
  allowed) or answered with every cell cut to `max_cell_chars` (the "more chars" marker) or
  shown as ``<blob N bytes>``; `phrase` is the size-limit phrase or the marker seen today;
- ``answered``: a harmless statement that must run and return `expected` as its first cell.

SQL may contain ``{database_dir}`` (the Spider ``database`` directory) and ``{tmp}`` (a scratch
directory); `Attack.render` fills them. `creates` names a file (same placeholders) that must
not exist after the attack, e.g. a VACUUM INTO target.

Tests import it as ``from adversarial import ATTACKS`` (``tests/`` is on the path through its
conftest). `snapshot` fingerprints the database files so a test can prove nothing changed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NOT_ALLOWED = "not allowed"
ONE_STATEMENT = "one SQL statement"
TIME_LIMIT = "time limit"
SIZE_LIMIT = "size limit"
CELL_MARKER = "more chars]"
BLOB_MARKER = "<blob "

CONCERT = "concert_singer"  # stadium 9, singer 6, concert 6, singer_in_concert 10 rows
WORLD = "world_1"  # city 4,079, country 239, countrylanguage 984 rows


@dataclass(frozen=True)
class Attack:
    id: str
    sql: str
    outcome: str  # rejected | failed | stopped | capped | answered
    phrase: str = ""
    db: str = CONCERT
    creates: str | None = None
    expected: Any = None

    def render(self, text: str, *, database_dir: str, tmp: str) -> str:
        return text.replace("{database_dir}", database_dir).replace("{tmp}", tmp)


def _rejected(id: str, sql: str, phrase: str = NOT_ALLOWED, **kw: Any) -> Attack:
    return Attack(id, sql, "rejected", phrase, **kw)


_LONG_SQL = "SELECT 1" + " " * 20_000 + "-- padding past max_sql_chars"
_TRIGGER = "CREATE {kind} tr AFTER INSERT ON singer BEGIN DELETE FROM singer; END"

ATTACKS: tuple[Attack, ...] = (
    # --- data writes -------------------------------------------------------------------------
    _rejected("insert", "INSERT INTO singer VALUES (99, 'x', 'y', 'z', '2000', 1, 'T')"),
    _rejected("insert_or_ignore", "INSERT OR IGNORE INTO singer(Singer_ID) VALUES (100)"),
    _rejected("insert_select", "INSERT INTO singer(Singer_ID) SELECT Singer_ID + 100 FROM singer"),
    _rejected("update", "UPDATE singer SET Age = 0"),
    _rejected("delete", "DELETE FROM singer"),
    _rejected("replace", "REPLACE INTO singer(Singer_ID, Name) VALUES (1, 'pwned')"),
    _rejected(
        "upsert",
        "INSERT INTO singer(Singer_ID) VALUES (1) ON CONFLICT(Singer_ID) DO UPDATE SET Age = 0",
    ),
    # --- schema changes ----------------------------------------------------------------------
    _rejected("create_table", "CREATE TABLE pwned(x)"),
    _rejected("create_table_as", "CREATE TABLE pwned AS SELECT * FROM singer"),
    _rejected("drop_table", "DROP TABLE singer"),
    _rejected("drop_table_if_exists", "DROP TABLE IF EXISTS singer_in_concert"),
    _rejected("alter_add_column", "ALTER TABLE singer ADD COLUMN pwned TEXT"),
    _rejected("alter_rename", "ALTER TABLE singer RENAME TO pwned"),
    _rejected("create_index", "CREATE INDEX pwned ON singer(Age)"),
    _rejected("drop_index", "DROP INDEX idx_city_CountryCode", db=WORLD),
    _rejected("create_view", "CREATE VIEW pwned AS SELECT 1"),
    _rejected("create_trigger", _TRIGGER.format(kind="TRIGGER")),
    _rejected("create_virtual_table", "CREATE VIRTUAL TABLE pwned USING fts5(x)"),
    _rejected("create_temp_table", "CREATE TEMP TABLE pwned(x)"),
    _rejected("create_temp_view", "CREATE TEMP VIEW pwned AS SELECT * FROM singer"),
    _rejected("create_temp_trigger", _TRIGGER.format(kind="TEMP TRIGGER")),
    # --- other databases ---------------------------------------------------------------------
    _rejected(
        "attach_other_spider_db",
        "ATTACH DATABASE '{database_dir}/world_1/world_1.sqlite' AS w",
    ),
    _rejected("attach_memory", "ATTACH ':memory:' AS m"),
    _rejected(
        "attach_new_file", "ATTACH '{tmp}/attached.sqlite' AS a", creates="{tmp}/attached.sqlite"
    ),
    _rejected("detach_main", "DETACH DATABASE main"),
    Attack("read_unattached_db", "SELECT * FROM w.city", "failed", "no such table", db=CONCERT),
    # --- PRAGMAs, mutating and reading ---------------------------------------------------------
    _rejected("pragma_journal_mode_wal", "PRAGMA journal_mode = WAL"),
    _rejected("pragma_writable_schema", "PRAGMA writable_schema = ON"),
    _rejected("pragma_query_only_off", "PRAGMA query_only = OFF"),
    _rejected("pragma_user_version", "PRAGMA user_version = 1"),
    _rejected("pragma_foreign_keys", "PRAGMA foreign_keys = ON"),
    _rejected("pragma_locking_mode", "PRAGMA locking_mode = EXCLUSIVE"),
    _rejected("pragma_read_table_info", "PRAGMA table_info(singer)"),
    _rejected(
        "pragma_function_table_info", "SELECT * FROM pragma_table_info('singer')", "table-valued"
    ),
    # --- extensions --------------------------------------------------------------------------
    _rejected("load_extension", "SELECT load_extension('./evil.so')"),
    _rejected("load_extension_upper_case", "SELECT LOAD_EXTENSION('libevil', 'init')"),
    _rejected("fts3_tokenizer", "SELECT fts3_tokenizer('simple')"),
    # --- several statements in one call ------------------------------------------------------
    _rejected("two_statements", "SELECT 1; DROP TABLE singer", ONE_STATEMENT),
    _rejected(
        "two_statements_comments_between",
        "SELECT 1; /* block */ -- line\n DROP TABLE singer",
        ONE_STATEMENT,
    ),
    _rejected(
        "select_then_insert_no_space",
        "SELECT Name FROM singer;INSERT INTO singer(Singer_ID) VALUES (7)",
        ONE_STATEMENT,
    ),
    Attack(
        "semicolon_inside_string_literal",
        "SELECT 'a; DROP TABLE singer' AS x",
        "answered",
        expected="a; DROP TABLE singer",
    ),
    Attack("trailing_semicolon_and_comment", "SELECT 42; -- done", "answered", expected=42),
    # --- maintenance commands ----------------------------------------------------------------
    _rejected("vacuum", "VACUUM"),
    _rejected("vacuum_into_tmp", "VACUUM INTO '{tmp}/copy.sqlite'", creates="{tmp}/copy.sqlite"),
    _rejected(
        "vacuum_into_spider_dir",
        "VACUUM INTO '{database_dir}/concert_singer/copy.sqlite'",
        creates="{database_dir}/concert_singer/copy.sqlite",
    ),
    _rejected("reindex", "REINDEX"),
    _rejected("analyze", "ANALYZE"),
    # --- transactions ------------------------------------------------------------------------
    _rejected("begin", "BEGIN"),
    _rejected("begin_immediate", "BEGIN IMMEDIATE"),
    _rejected("begin_exclusive", "BEGIN EXCLUSIVE TRANSACTION"),
    _rejected("commit", "COMMIT"),
    _rejected("rollback", "ROLLBACK"),
    _rejected("savepoint", "SAVEPOINT s1"),
    _rejected("release", "RELEASE SAVEPOINT s1"),
    # --- comment and case tricks -------------------------------------------------------------
    _rejected("block_comment_insert", "/**/INSERT INTO singer(Singer_ID) VALUES (7)"),
    _rejected("mixed_case_insert", "iNsErT InTo singer(Singer_ID) VALUES (7)"),
    _rejected("line_comment_delete", "-- just a comment\n DELETE FROM singer"),
    _rejected("with_delete", "WITH doomed AS (SELECT 1) DELETE FROM singer"),
    _rejected(
        "with_insert",
        "WITH x(v) AS (SELECT 100) INSERT INTO singer(Singer_ID) SELECT v FROM x",
    ),
    _rejected("explain_delete", "EXPLAIN DELETE FROM singer"),
    Attack("nul_byte_hides_second_statement", "SELECT 1\x00; DROP TABLE singer", "failed", "null"),
    # --- table-valued functions -------------------------------------------------------------
    _rejected("pragma_database_list", "SELECT * FROM pragma_database_list", "table-valued"),
    _rejected("json_each", "SELECT * FROM json_each('[1, 2]')", "table-valued"),
    _rejected("dbstat", "SELECT * FROM dbstat", "table-valued"),
    # --- size limits -------------------------------------------------------------------------
    _rejected("sql_longer_than_max_sql_chars", _LONG_SQL, "the limit is"),
    Attack("zeroblob_2gb", "SELECT zeroblob(2000000000)", "capped", SIZE_LIMIT),
    Attack("randomblob_2gb", "SELECT randomblob(2000000000)", "capped", SIZE_LIMIT),
    Attack("zeroblob_under_value_limit", "SELECT zeroblob(999999)", "capped", BLOB_MARKER),
    Attack("randomblob_small", "SELECT randomblob(1000)", "capped", BLOB_MARKER),
    Attack("hex_zeroblob_800k_chars", "SELECT hex(zeroblob(400000))", "capped", CELL_MARKER),
    Attack("hex_zeroblob_over_value_limit", "SELECT hex(zeroblob(600000))", "capped", SIZE_LIMIT),
    Attack("printf_repeat_900k", "SELECT printf('%.*c', 900000, 'x')", "capped", CELL_MARKER),
    Attack(
        "replace_replicate_20k",
        "SELECT replace(hex(zeroblob(1000)), '0', 'aaaaaaaaaa')",
        "capped",
        CELL_MARKER,
    ),
    Attack(
        "replace_replicate_over_value_limit",
        "SELECT replace(hex(zeroblob(100000)), '0', 'aaaaaaaaaa')",
        "capped",
        SIZE_LIMIT,
    ),
    Attack("quote_zeroblob", "SELECT quote(zeroblob(450000))", "capped", CELL_MARKER),
    Attack(
        "recursive_string_doubling",
        "WITH RECURSIVE s(x) AS (SELECT 'a' UNION ALL SELECT x || x FROM s) "
        "SELECT length(x) FROM s",
        "capped",
        SIZE_LIMIT,
    ),
    # --- runaway queries ---------------------------------------------------------------------
    Attack(
        "infinite_recursive_cte",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
        "stopped",
        TIME_LIMIT,
    ),
    Attack(
        "recursive_string_growth",
        "WITH RECURSIVE s(n, x) AS (SELECT 1, 'a' UNION ALL "
        "SELECT n + 1, x || 'aaaaaaaaaa' FROM s) SELECT max(length(x)) FROM s",
        "capped",
        SIZE_LIMIT,
    ),
    Attack(
        "cartesian_city_x4",
        "SELECT count(*) FROM city a, city b, city c, city d",
        "stopped",
        TIME_LIMIT,
        db=WORLD,
    ),
    Attack(
        "cartesian_city_x5",
        "SELECT a.Name, e.Name FROM city a, city b, city c, city d, city e "
        "ORDER BY a.Name || e.Name DESC",
        "stopped",
        TIME_LIMIT,
        db=WORLD,
    ),
    Attack(
        "cartesian_distinct_pairs",
        "SELECT count(DISTINCT a.ID * 10000 + b.ID) FROM city a, city b",
        "stopped",
        TIME_LIMIT,
        db=WORLD,
    ),
)


@dataclass(frozen=True)
class TableArgument:
    """A `table` argument for describe()/sample(): it resolves to `resolves_to` or raises."""

    id: str
    table: Any
    resolves_to: str | None = None
    error: str = "UnknownTableError"  # or InvalidArgumentError
    phrase: str = "no such table"


_NON_EMPTY = "non-empty table name"

TABLE_ARGUMENTS: tuple[TableArgument, ...] = (
    TableArgument("statement_after_name", "singer; DROP TABLE singer"),
    TableArgument("close_quote_comment", 'singer" --'),
    TableArgument("close_quote_statement", 'singer"; DROP TABLE "singer'),
    TableArgument("single_quote_or", "singer' OR 1=1 --"),
    TableArgument("embedded_quote", 'sin"ger'),
    TableArgument("nul_after_name", "singer\x00"),
    TableArgument("nul_only", "\x00"),
    TableArgument("very_long_name", "x" * 100_000),
    TableArgument("schema_qualified", "main.singer"),
    TableArgument("internal_table", "sqlite_master"),
    TableArgument("double_quoted", '"singer"', resolves_to="singer"),
    TableArgument("backticked", "`singer`", resolves_to="singer"),
    TableArgument("bracketed", "[singer]", resolves_to="singer"),
    TableArgument("padded_upper_case", "  SINGER\n", resolves_to="singer"),
    TableArgument("empty", "", error="InvalidArgumentError", phrase=_NON_EMPTY),
    TableArgument("blank", "   ", error="InvalidArgumentError", phrase=_NON_EMPTY),
    TableArgument("none", None, error="InvalidArgumentError", phrase=_NON_EMPTY),
    TableArgument("int", 3, error="InvalidArgumentError", phrase=_NON_EMPTY),
    TableArgument("bytes", b"singer", error="InvalidArgumentError", phrase=_NON_EMPTY),
    TableArgument("list", ["singer"], error="InvalidArgumentError", phrase=_NON_EMPTY),
)

# sample(n=...) values that must be refused with InvalidArgumentError ("whole number").
BAD_SAMPLE_SIZES: tuple[Any, ...] = (0, -1, True, False, 2.5, "3", None)


def snapshot(database_dir: Path) -> tuple[dict[str, str], frozenset[str]]:
    """SHA-256 of every `*.sqlite` file and the set of every path under `database_dir`."""
    paths = sorted(database_dir.rglob("*"))
    hashes = {
        str(path.relative_to(database_dir)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in paths
        if path.suffix == ".sqlite"
    }
    return hashes, frozenset(str(path.relative_to(database_dir)) for path in paths)


# --- resource attacks: short, legal statements that cost seconds and gigabytes ---------------
# SQLite spends this work *preparing* the statement, where no deadline reaches: each is bounded
# by the sandbox (a worker's memory budget, or its kill past the deadline), never by a rule
# about the SQL's text.

MEMORY_BUDGET = "MiB of memory"


def cte_chain(levels: int, materialized: str = "", join: bool = False) -> str:
    """Each CTE reads the one before twice: the statement expands to 2**levels reads."""
    ctes = ["c0(x) AS (SELECT 1)"]
    for level in range(1, levels):
        source = (
            f"c{level - 1} a JOIN c{level - 1} b ON a.x = b.x"
            if join
            else f"c{level - 1} a, c{level - 1} b"
        )
        ctes.append(f"c{level}(x) AS {materialized}(SELECT a.x FROM {source})")
    return f"WITH {', '.join(ctes)} SELECT count(*) FROM c{levels - 1}"


def doubling_flattening(levels: int) -> str:
    """Each CTE is read once but doubles the expression before it: flattening the subqueries
    copies it, so the statement grows to 2**levels terms."""
    ctes = ["c0(x) AS (SELECT 1)"]
    ctes += [f"c{level}(x) AS (SELECT x + x FROM c{level - 1})" for level in range(1, levels)]
    return f"WITH {', '.join(ctes)} SELECT x FROM c{levels - 1}"


def wide_rows(columns: int = 1990, rows: int = 21) -> str:
    """~`columns` x 18 KB values on each of `rows` rows: ~750 MB if a result were built whole."""
    cells = ", ".join(["v"] * columns)
    return (
        f"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < {rows}), "
        f"w(v) AS (SELECT hex(zeroblob(9000))) SELECT {cells} FROM r, w"
    )


RESOURCE_ATTACKS: tuple[Attack, ...] = (
    Attack("cte_chain", cte_chain(24), "rejected", MEMORY_BUDGET),
    Attack("cte_chain_materialized", cte_chain(24, "MATERIALIZED "), "rejected", MEMORY_BUDGET),
    Attack(
        "cte_chain_not_materialized",
        cte_chain(24, "NOT MATERIALIZED "),
        "rejected",
        MEMORY_BUDGET,
    ),
    Attack("cte_chain_join", cte_chain(24, join=True), "rejected", MEMORY_BUDGET),
    Attack("doubling_flattening", doubling_flattening(28), "rejected", MEMORY_BUDGET),
    Attack("wide_rows", wide_rows(), "capped", "1 row shown, its values cut short to fit"),
)

# Answers of the longest length allowed that a backtracking pattern would take seconds to read.
HOSTILE_ANSWERS: dict[str, str] = {
    "answer_prefix_spaces": "Answer" + " " * 19_994,
    "bold_stars": "**" * 10_000,
    "thousands_commas": "1" + ",111" * 4_999,
    "fence_backticks": "```" * 6_666,
}
