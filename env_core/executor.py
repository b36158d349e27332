"""A SQLite executor that can only read, enforced by SQLite itself rather than by keyword checks.

Layers, each sufficient on its own against writes:
  1. the file is opened through a `mode=ro` URI (and `immutable=1` when nothing else writes it);
  2. `PRAGMA query_only` is switched on before any agent SQL runs;
  3. an authorizer allows only SELECT, reads, functions and recursive CTEs, and denies every
     other action code (writes, DDL, temp objects, ATTACH/DETACH, PRAGMA, transactions);
  4. limits: no attached databases, bounded SQL length and value size, a progress-handler
     deadline on every statement, one statement per call, rows capped while they are fetched.
Table names from agents are matched against `sqlite_master` and quoted, never pasted into SQL.

With a `Sandbox`, agent SQL runs in a worker process instead (see `env_core.sandbox`), which
also bounds the time and memory SQLite spends *preparing* a statement. Only calls that are
bounded by construction run here: describe (read once, cached), sample on a plain table,
agent SQL whose compiled program is bounded (`env_core.programs`), and agent SQL the sandbox has
already run quickly on the same unchanging file (`ProvenStatements`).
Results read from an unchanging file are kept and given again without running any SQL
(`KeptResults`).
Functions that cannot be interrupted are replaced on every connection, so a schema expression
(a generated column or a view in the user's file) cannot call them either.
"""

from __future__ import annotations

import functools
import itertools
import re
import sqlite3
import string
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from sys import getsizeof
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from env_core import programs
from env_core.errors import (
    DataError,
    InvalidArgumentError,
    QueryFailedError,
    QueryRejectedError,
    QueryTimeoutError,
    SQLEnvError,
    UnknownTableError,
    shortened,
)
from env_core.render import (
    ALL_TABLES,
    MAX_LISTED_CHARS,
    MAX_TEXT_CHARS,
    names_text,
    rows_text,
    schema_parts_shown,
    schema_text,
    visible,
)
from env_core.sandbox import Job, SharedRun, Work, finish
from env_core.settings import Settings
from env_core.tools import check_text

if TYPE_CHECKING:
    from env_core.sandbox import Sandbox

Cell = int | float | str | None
# What proofs, shared runs and kept results are held under: the executor's serial, the
# statement, its row limit and the client it ran for (see `KeptResults`).
CallKey = tuple[int, str, int, str | None]


@dataclass(frozen=True)
class ExecutorLimits:
    timeout_s: float = Settings.query_timeout_s
    max_rows: int = Settings.max_rows
    max_sample_rows: int = 20
    max_sql_chars: int = 8_000
    max_cell_chars: int = 500
    max_result_chars: int = MAX_TEXT_CHARS
    # A single SQL function call cannot be interrupted, and the cost of some (instr, replace,
    # LIKE) grows with the product of their arguments' sizes: small values keep one call short.
    max_value_bytes: int = 20_000
    max_like_pattern_bytes: int = 100

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.max_rows < 1 or self.max_sql_chars < 1:
            raise ValueError("timeout_s, max_rows and max_sql_chars must be positive")


@dataclass(frozen=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    truncated: bool
    elapsed_ms: float
    # Whether running the statement again does the same work: it called no function whose
    # value changes from run to run (`_UNREPEATABLE_FUNCTIONS`). Known only where statements
    # are compiled afresh, as in a sandbox worker.
    repeatable: bool = True
    # Its one row was wider than the result's budget, and its texts were cut to fit.
    narrowed: bool = False

    @functools.cached_property
    def text(self) -> str:
        """The rows as a language model reads them, rendered once: a kept result is given
        again and again."""
        return rows_text(self)


# What a statement read: its columns, its rows, whether rows were left out, and whether its
# one row was narrowed to fit (see `QueryResult`).
Fetched = tuple[tuple[str, ...], tuple[tuple[Cell, ...], ...], bool, bool]


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    primary_key: bool
    not_null: bool


@dataclass(frozen=True)
class ForeignKey:
    column: str
    ref_table: str
    ref_column: str | None


@dataclass(frozen=True)
class TableSchema:
    name: str
    columns: tuple[Column, ...]
    foreign_keys: tuple[ForeignKey, ...]
    # None for a view or a virtual table (counting would run the file's SQL or module code),
    # and for a table too large to count within the query timeout.
    row_count: int | None
    # Reading it evaluates expressions: a view, a virtual table, or generated columns.
    computed: bool = False
    # The definition of a view or virtual table (its columns are known once it is read, in
    # the sandbox).
    definition: str | None = None
    kind: str = "table"  # "table", "view" or "virtual table"

    @functools.cached_property
    def text(self) -> str:
        """The table as a language model reads it, rendered once: a schema is read once."""
        return schema_text(self)

    @functools.cached_property
    def shown(self) -> tuple[int, int]:
        """How many of its columns and foreign keys its renderings show (the rest would not
        fit their budget)."""
        return schema_parts_shown(self)


_ALLOWED_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
# printf/format: SQLite 3.40's '%.*c' keeps looping past the value-size limit, uninterruptibly.
_DENIED_FUNCTIONS = frozenset(
    {"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit", "printf", "format"}
)
# Functions whose value changes from run to run (chance, the clock), so a statement calling
# them may take another branch, and another time, when run again.
_UNREPEATABLE_FUNCTIONS = frozenset(
    {"random", "randomblob", "date", "time", "datetime", "julianday", "unixepoch", "strftime"}
    | {"timediff", "current_date", "current_time", "current_timestamp"}
)
_ACTION_NAMES = {
    getattr(sqlite3, f"SQLITE_{name}"): name.replace("_", " ")
    for name in [
        *("CREATE_INDEX", "CREATE_TABLE", "CREATE_TRIGGER", "CREATE_VIEW", "CREATE_VTABLE"),
        *("CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER", "CREATE_TEMP_VIEW"),
        *("DROP_INDEX", "DROP_TABLE", "DROP_TRIGGER", "DROP_VIEW", "DROP_VTABLE"),
        *("DROP_TEMP_INDEX", "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW"),
        *("INSERT", "UPDATE", "DELETE", "ALTER_TABLE", "REINDEX", "ANALYZE", "PRAGMA"),
        *("TRANSACTION", "SAVEPOINT", "ATTACH", "DETACH", "READ", "SELECT", "FUNCTION"),
        "RECURSIVE",
    ]
}
# SQLite checks the deadline only at loop jumps once this many opcodes have run: a large value
# lets a short but slow statement (a row of costly function calls) finish past its deadline.
_PROGRESS_OPCODES = 200


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _ascii_folded(text: str) -> str:
    """The text as SQLite compares names and keywords: ASCII letters in lower case, every
    other character as it is (so "STRASSE" and "straße" stay two names)."""
    return text.translate(_ASCII_LOWER)


def open_read_only(
    path: Path, *, immutable: bool, statement_cache: bool = True
) -> sqlite3.Connection:
    """Open an existing SQLite file read-only; never creates or changes a file beside it.

    A database in WAL mode is opened `immutable` even when others may write it: a reader would
    otherwise create (and write to) `-wal` and `-shm` files next to it. It then shows what
    has been checkpointed into the main file. Without `statement_cache` every call prepares
    its statement again, so that its time includes compiling it.
    """
    if not path.is_file():
        raise DataError(f"database file not found: {path}")
    immutable = immutable or _in_wal_mode(path)
    uri = f"file:{quote(str(path.resolve()))}?mode=ro" + ("&immutable=1" if immutable else "")
    try:
        cached = 128 if statement_cache else 0
        connection = sqlite3.connect(
            uri, uri=True, check_same_thread=False, cached_statements=cached
        )
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as error:
        raise DataError(f"cannot open {path} as a SQLite database: {error}") from error
    for name, arity in _UNINTERRUPTIBLE:
        connection.create_function(name, arity, _refuse(name))
    return connection


def _in_wal_mode(path: Path) -> bool:
    with path.open("rb") as handle:
        header = handle.read(20)
    return len(header) == 20 and header[18:20] == b"\x02\x02"


# Replaced on every connection, so that no SQL, the schema's included, can call them.
_UNINTERRUPTIBLE = (("printf", -1), ("format", -1), ("load_extension", 1), ("load_extension", 2))


def _refuse(name: str):
    def refuse(*_args: Any) -> None:
        raise sqlite3.OperationalError(f"{name} is not allowed")

    return refuse


def file_state(path: Path) -> tuple[int, int, int, int]:
    """What changes when another program writes or replaces the file: which file it is, its
    size and its modification time."""
    stat = path.stat()
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


# Bounds a row of a table sampled in process: columns x the value-size limit.
INLINE_SAMPLE_COLUMNS = 256


class ProvenStatements:
    """Agent SQL that a sandbox worker prepared and ran to its end within `PROOF_MS` on a file
    that never changes, calling no function whose value changes from run to run (chance, the
    clock): the same statement on the same file does the same work again, so it may
    run in process, where it skips the trip to a worker (~0.1 ms, more under load). The worker
    compiles every statement afresh (no statement cache), so the time proven includes that.
    A run in process still has a deadline (`DEADLINE_S`): past it, or on any error, the
    statement goes back to the sandbox, for good the second time. A proof, and a shared run,
    hold for the executor whose worker ran the statement (the episodes of one episode manager;
    an assessment has its own) and the client it ran for, never another: whether a call is
    answered sooner tells a client nothing of what others asked. Bounded: the newest
    `ENTRIES` statements of at most `MAX_SQL_CHARS` each, over all executors."""

    PROOF_MS = 1.0
    DEADLINE_S = 0.005
    ENTRIES = 2048
    MAX_OVERRUNS = 2
    MAX_SQL_CHARS = 2_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proven: OrderedDict[CallKey, None] = OrderedDict()
        self._running: dict[CallKey, SharedRun] = {}
        # How often each statement overran or failed in process: at `MAX_OVERRUNS` it is not
        # proven again, though its runs in the sandbox stay quick.
        self._overruns: OrderedDict[CallKey, int] = OrderedDict()

    def holds(self, key: CallKey) -> bool:
        with self._lock:
            if key not in self._proven:
                return False
            self._proven.move_to_end(key)
            return True

    def running(self, key: CallKey) -> SharedRun | None:
        """The run of the statement another call has started, to wait for; else None, and the
        caller runs it, then reports to `ran`. Calls that ask for the same statement at once
        (the rollouts of one question) then take one worker, not one each."""
        with self._lock:
            if key in self._running:
                return self._running[key]
            self._running[key] = SharedRun()
            return None

    def ran(self, key: CallKey, result: QueryResult | None) -> None:
        """The sandbox's result for the statement (None if it failed or was given up): shared
        with the calls waiting for it if running it again would do the same work, and kept
        as its proof if that work was cheap."""
        repeatable = result is not None and result.repeatable
        cheap = repeatable and result.elapsed_ms <= self.PROOF_MS
        with self._lock:
            shared = self._running.pop(key)
            if cheap and self._trusted(key) and len(key[1]) <= self.MAX_SQL_CHARS:
                _keep(self._proven, key, None, self.ENTRIES)
        shared.share(result if repeatable else None)

    def trusted(self, key: CallKey) -> bool:
        """Whether the statement may run in process: it has overrun or failed there fewer than
        `MAX_OVERRUNS` times."""
        with self._lock:
            return self._trusted(key)

    def _trusted(self, key: CallKey) -> bool:
        return self._overruns.get(key, 0) < self.MAX_OVERRUNS

    def overran(self, key: CallKey) -> None:
        """The statement overran or failed in process: it loses its proof, for good once this
        has happened `MAX_OVERRUNS` times (once may be a pause of the machine's)."""
        with self._lock:
            self._proven.pop(key, None)
            _keep(self._overruns, key, self._overruns.get(key, 0) + 1, self.ENTRIES)


def _keep(newest: OrderedDict, key: Any, value: Any, entries: int) -> None:
    """Set `key` in a bounded mapping that forgets its oldest first."""
    newest[key] = value
    newest.move_to_end(key)
    if len(newest) > entries:
        newest.popitem(last=False)


PROVEN = ProvenStatements()


class KeptResults:
    """Results read from files that never change, kept to be given again without running any
    SQL: a statement that calls no function of chance or the clock (`QueryResult.repeatable`)
    reads the same rows from the same file every time, and agents ask again and again (every
    rollout of a question samples the same tables and tries the same queries). Like proofs,
    results are kept for the executor that read them and the client they were read for, never
    given to another client (whose call runs anew, as slowly as a new statement runs, and shows
    its own `elapsed_ms`) nor to another episode manager, and let go when the executor closes.
    A client given its kept result sees what its own first run showed, `elapsed_ms` included.
    Bounded: the newest results, `max_bytes` in all with
    their statements (`result_bytes`); a result over `max_result_bytes` is not kept."""

    # What an entry holds beside its statement and result: its key, its pair, its place.
    ENTRY_BYTES = 400

    def __init__(self, max_bytes: int = 32 << 20, max_result_bytes: int = 1 << 20) -> None:
        self.max_bytes = max_bytes
        self.max_result_bytes = max_result_bytes
        self._lock = threading.Lock()
        self._results: OrderedDict[CallKey, tuple[QueryResult, int]] = OrderedDict()
        self.bytes = 0

    def get(self, key: CallKey) -> QueryResult | None:
        with self._lock:
            kept = self._results.get(key)
            if kept is None:
                return None
            self._results.move_to_end(key)
            return kept[0]

    def keep(self, key: CallKey, result: QueryResult) -> None:
        """Keep `result` if it is repeatable and small enough."""
        if not result.repeatable:
            return
        size = result_bytes(result) + held((key[1],)) + self.ENTRY_BYTES
        if size > self.max_result_bytes:
            return
        with self._lock:
            self._drop(key)
            self._results[key] = result, size
            self.bytes += size
            while self.bytes > self.max_bytes:
                self._drop(next(iter(self._results)))

    def forget(self, serial: int) -> None:
        """Let go of the results an executor read (it has closed)."""
        with self._lock:
            for key in [key for key in self._results if key[0] == serial]:
                self._drop(key)

    def _drop(self, key: CallKey) -> None:
        kept = self._results.pop(key, None)
        if kept is not None:
            self.bytes -= kept[1]


# Python's allocator gives every object a multiple of this.
ALIGNMENT = 16


def result_bytes(result: QueryResult) -> int:
    """The memory a result holds, never less: its tuples and every cell, shared ones too (see
    `held`), and its text."""
    size = held(result.columns) + held((result.text,)) + getsizeof(result.rows) + ALIGNMENT - 1
    for row in result.rows:
        size += held(row)
    return size


def held(values: tuple) -> int:
    """What a tuple and the values in it hold, each rounded up as the allocator rounds it; a
    text that is not ASCII with the UTF-8 copy it keeps once something has encoded it (a
    door's JSON, SQLite), which can triple a Latin-1 text."""
    size = getsizeof(values) + sum(map(getsizeof, values)) + (ALIGNMENT - 1) * (len(values) + 1)
    for value in values:
        if type(value) is str and not value.isascii():
            size += len(value.encode("utf-8", "surrogatepass")) + 1
    return size


KEPT = KeptResults()
_SERIALS = itertools.count()


class ReadOnlyExecutor:
    """One read-only connection to one database file. Calls are serialised by a lock.

    `immutable`: nothing else writes the file (the catalog's databases). Otherwise (a user's
    file) the schema is read again whenever the file changes. `lazy_schema`: read the schema
    only when a call needs it (a sandbox worker: opening a database there is then one file
    open rather than a row count of every table, and most of its calls never need it).
    """

    def __init__(
        self,
        path: Path,
        limits: ExecutorLimits | None = None,
        *,
        immutable: bool = True,
        sandbox: Sandbox | None = None,
        lazy_schema: bool = False,
        statement_cache: bool = True,
    ) -> None:
        self.path = Path(path)
        self.limits = limits or ExecutorLimits()
        self.immutable = immutable
        self.sandbox = sandbox
        self._lock = threading.Lock()
        self._deadline = 0.0
        self._denied: str | None = None
        self._late = False
        self._repeatable = True
        self._users = 1
        self._lazy_schema = lazy_schema
        # With a sandbox, what runs here on a file that never changes is kept (`KEPT`), never
        # compiled again; and agent SQL run here must leave nothing compiled behind (see `_run`).
        self._statement_cache = statement_cache and not (sandbox is not None and immutable)
        self._serial = next(_SERIALS)  # names its proofs (see ProvenStatements)
        self._open()

    def _open(self) -> None:
        self._state = file_state(self.path) if self.path.exists() else None
        self._known: dict[str, TableSchema] | None = None
        if not self._lazy_schema:
            self._read_schema()
        self._connection = open_read_only(
            self.path, immutable=self.immutable, statement_cache=self._statement_cache
        )
        self._harden(self._connection)
        self._uncached: sqlite3.Connection | None = None  # for proven statements: see _run

    def _close_connections(self) -> None:
        self._connection.close()
        if self._uncached is not None:
            self._uncached.close()

    @property
    def _schema(self) -> dict[str, TableSchema]:
        return self._known if self._known is not None else self._read_schema()

    def _read_schema(self) -> dict[str, TableSchema]:
        self._known = SCHEMAS.get(
            self.path, immutable=self.immutable, timeout_s=self.limits.timeout_s
        )
        # SQLite refuses two names that differ only in ASCII case, so these never collide.
        self._table_names = {_ascii_folded(name): name for name in self._known}
        return self._known

    @property
    def tables(self) -> tuple[str, ...]:
        self._follow_changes()
        return tuple(self._schema)

    def share(self) -> ReadOnlyExecutor:
        """One more user of this connection (episodes on one database share one): each user
        closes it once, and the last close closes the connection."""
        with self._lock:
            self._users += 1
        return self

    def close(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                self._close_connections()
                KEPT.forget(self._serial)

    def resolve_table(self, name: str) -> str:
        """The table's real name from `sqlite_master`: the name itself, else the table SQLite
        would read for it (ignoring ASCII case), else the same for the name without the quotes,
        brackets or spaces around it."""
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgumentError("table must be a non-empty table name")
        check_text("table", name)
        self._follow_changes()
        schema = self._schema
        for candidate in (name, name.strip().strip('"`[]')):
            if candidate in schema:
                return candidate
            table = self._table_names.get(_ascii_folded(candidate))
            if table is not None:
                return table
        tables = names_text(tuple(schema), MAX_LISTED_CHARS, ALL_TABLES)
        raise UnknownTableError(
            f"no such table: {visible(shortened(name, 80))}; tables are: {tables}"
        )

    def describe(self, table: str) -> TableSchema:
        name = self.resolve_table(table)  # first: it may read a changed schema
        return self._schema[name]

    def sample(self, table: str, n: int = 5) -> QueryResult:
        return finish(self.sample_work(self.describe(table), n))

    def query(self, sql: str, max_rows: int | None = None) -> QueryResult:
        return finish(self.query_work(sql, max_rows))

    def sample_work(
        self, schema: TableSchema, n: int = 5, *, client: str | None = None
    ) -> Work[QueryResult]:
        """Sample a table (as `describe` returned it) as a call (see `env_core.sandbox`): the
        result kept (`KEPT`) if it was read before, else in process on a plain table, whose
        rows are bounded by its width, and in the sandbox when reading it computes
        expressions. `client`: whom the sandbox serves it for and the result is kept for."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidArgumentError("n must be a whole number of rows, at least 1")
        n = min(n, self.limits.max_sample_rows)
        sql = f"SELECT * FROM {quote_identifier(schema.name)} LIMIT {n}"
        if self.sandbox is None:
            return self._run(sql, n)
        key = (self._serial, sql, n, client)
        kept = self._kept(key)
        if kept is not None:
            return kept
        if schema.computed or len(schema.columns) > INLINE_SAMPLE_COLUMNS:
            result = QueryResult(*(yield self._job("sample", schema.name, n, client)))
        else:
            result = self._run(sql, n)
        return self._keep(key, result)

    def query_work(
        self, sql: str, max_rows: int | None = None, *, client: str | None = None
    ) -> Work[QueryResult]:
        """Run agent SQL as a call: in the sandbox when there is one (for `client`), unless its
        result is kept (`KEPT`) for `client`, it may run in process (`_in_process_s`), or
        another call of `client`'s is running it already."""
        if not isinstance(sql, str) or not sql.strip():
            raise InvalidArgumentError("sql must be a non-empty SELECT statement")
        check_text("sql", sql)
        if len(sql) > self.limits.max_sql_chars:
            raise QueryRejectedError(
                f"SQL is {len(sql)} characters; the limit is {self.limits.max_sql_chars}"
            )
        if max_rows is not None and (
            isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1
        ):
            raise InvalidArgumentError("max_rows must be a whole number, at least 1")
        limit = max_rows or self.limits.max_rows
        if self.sandbox is None:
            return self._run(sql, limit)
        if not self.immutable:
            return QueryResult(*(yield self._job("query", sql, limit, client)))
        key = (self._serial, sql, limit, client)
        kept = self._kept(key)
        if kept is not None:
            return kept
        deadline_s = self._in_process_s(sql, key)
        if deadline_s is not None:
            try:
                return self._keep(key, self._run(sql, limit, deadline_s=deadline_s))
            except SQLEnvError:
                PROVEN.overran(key)
        job = self._job("query", sql, limit, client)
        shared = PROVEN.running(key)
        if shared is not None:  # the same statement is running for another call: wait for it
            result = yield shared, job[1]
            return result if result is not None else QueryResult(*(yield job))
        result = None
        try:
            result = self._keep(key, QueryResult(*(yield job)))
            return result
        finally:
            PROVEN.ran(key, result)

    def _in_process_s(self, sql: str, key: CallKey) -> float | None:
        """How long agent SQL may run in process, or None if only the sandbox may run it:
        `DEADLINE_S` if `PROVEN`, and if its program is bounded (`_bounded`) the bounded
        programs' own (`env_core.programs.DEADLINE_S`)."""
        if PROVEN.holds(key):
            return PROVEN.DEADLINE_S
        if self._bounded(sql, key):
            return programs.DEADLINE_S
        return None

    def _bounded(self, sql: str, key: CallKey) -> bool:
        """Whether the program SQLite compiles `sql` to is bounded (`env_core.programs`), on a
        file small and plain enough for it (`_plain_small_file`), and the statement has not
        overrun in process before. It is compiled here only when it is a SELECT whose text
        says that is cheap and may find it bounded; compiling it past the deadline of a run
        here is an overrun."""
        worth = programs.worth_compiling(sql) and _first_words(sql, 1) == ("select",)
        if not (self._plain_small_file and worth and PROVEN.trusted(key)):
            return False
        with self._lock:
            self._deadline = time.monotonic() + programs.DEADLINE_S
            try:
                program = self._uncached_connection().execute(f"EXPLAIN {sql}").fetchall()
            except sqlite3.Error:
                program = None
            late = time.monotonic() > self._deadline
        if late:
            PROVEN.overran(key)
        return program is not None and not late and programs.runs_bounded(program)

    @functools.cached_property
    def _plain_small_file(self) -> bool:
        """At most `MAX_FILE_BYTES` (a single step over it, such as counting a table's rows, is
        short) and no view, virtual table or generated column (a view's name expands when a
        statement is compiled). Asked only of a file that never changes."""
        small = self.path.stat().st_size <= programs.MAX_FILE_BYTES
        return small and not any(schema.computed for schema in self._schema.values())

    def _kept(self, key: CallKey) -> QueryResult | None:
        return KEPT.get(key) if self.immutable else None

    def _keep(self, key: CallKey, result: QueryResult) -> QueryResult:
        """Keep a result read from a file that never changes (see `KEPT`). A call that was
        running when the last user closed this executor leaves nothing kept, or nothing would
        let its result go; the result is sized outside this executor's lock."""
        if self.immutable:
            KEPT.keep(key, result)
            with self._lock:
                closed = not self._users
            if closed:
                KEPT.forget(self._serial)
        return result

    def _job(
        self, kind: str, argument: str, max_rows: int, client: str | None
    ) -> tuple[Sandbox, Job]:
        job = Job(str(self.path), self.immutable, self.limits, kind, argument, max_rows, client)
        return self.sandbox, job

    def _follow_changes(self) -> None:
        """Read the schema and reopen the file again if another program changed it."""
        if self.immutable:
            return
        try:
            state = file_state(self.path)
        except OSError:
            return  # gone: the next statement reports it
        if state != self._state:
            with self._lock:
                self._close_connections()
                self._open()

    def _harden(self, connection: sqlite3.Connection) -> None:
        connection.execute("PRAGMA query_only = ON")
        connection.execute("PRAGMA temp_store = MEMORY")  # sorts never write temporary files
        connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        connection.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, self.limits.max_sql_chars * 4)
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.limits.max_value_bytes)
        connection.setlimit(
            sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, self.limits.max_like_pattern_bytes
        )
        connection.set_authorizer(self._authorize)
        connection.set_progress_handler(self._past_deadline, _PROGRESS_OPCODES)

    def _authorize(self, action: int, arg1, arg2, _db, _trigger) -> int:
        # Compiling never calls the progress handler; it calls this, which needs the GIL back
        # each time: past the deadline, compiling stops here.
        if time.monotonic() > self._deadline:
            self._late = True
            return sqlite3.SQLITE_DENY
        denied = False
        if action == sqlite3.SQLITE_FUNCTION:
            function = arg2.lower()
            self._repeatable &= function not in _UNREPEATABLE_FUNCTIONS
            denied = function in _DENIED_FUNCTIONS
        if action in _ALLOWED_ACTIONS and not denied:
            return sqlite3.SQLITE_OK
        if self._denied is None:  # the first refusal names what the statement tried to do
            self._denied = _denied_action(action, arg1, arg2)
        return sqlite3.SQLITE_DENY

    def _past_deadline(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0

    def _run(self, sql: str, limit: int, *, deadline_s: float | None = None) -> QueryResult:
        """Run a statement here. Agent SQL that a sandbox would otherwise run (see
        `_in_process_s`) runs under its own deadline, on a connection that keeps no compiled
        statements, so that it leaves nothing behind (a cache of wide statements held ~45 MiB
        per database)."""
        self._follow_changes()
        with self._lock:
            started = time.monotonic()
            self._deadline = started + (self.limits.timeout_s if deadline_s is None else deadline_s)
            self._denied = None
            self._late = False
            self._repeatable = True  # known only when the statement is compiled afresh
            connection = self._connection if deadline_s is None else self._uncached_connection()
            try:
                columns, rows, truncated, narrowed = self._fetch(connection, sql, limit)
            except sqlite3.Error as error:
                raise self._explain(error) from None
            elapsed_ms = (time.monotonic() - started) * 1000
            repeatable = self._repeatable
        return QueryResult(columns, rows, truncated, round(elapsed_ms, 3), repeatable, narrowed)

    def _uncached_connection(self) -> sqlite3.Connection:
        if not self._statement_cache:
            return self._connection
        if self._uncached is None:
            self._uncached = open_read_only(
                self.path, immutable=self.immutable, statement_cache=False
            )
            self._harden(self._uncached)
        return self._uncached

    def _fetch(self, connection: sqlite3.Connection, sql: str, limit: int) -> Fetched:
        try:
            return self._read(connection, sql, limit)
        except sqlite3.OperationalError as error:
            if not str(error).startswith("Could not decode"):
                raise
        # Text that is not UTF-8 in some row: read again, the bad bytes replaced.
        connection.text_factory = _decode_with_replacement
        try:
            return self._read(connection, sql, limit)
        finally:
            connection.text_factory = str

    def _read(self, connection: sqlite3.Connection, sql: str, limit: int) -> Fetched:
        cursor = connection.execute(sql)
        first = cursor.fetchone()
        columns = self._column_names(cursor.description or ())
        budget = self.limits.max_result_chars - _row_size(columns, None)
        return columns, *self._capped_rows(first, cursor, limit, budget)

    def _column_names(self, description: tuple) -> tuple[str, ...]:
        """The result's column names, each capped like a cell. They count toward the result's
        budget and may take half of it: past that, each is cut to an equal share (a statement
        can read one long name hundreds of times, `SELECT * FROM t, t AS t2, ...`)."""
        names = tuple(_cap_cell(column[0], self.limits.max_cell_chars) for column in description)
        half = self.limits.max_result_chars // 2
        if _row_size(names, None) > half:
            return _narrowed(names, half)
        return names

    def _capped_rows(
        self, row: tuple | None, cursor: sqlite3.Cursor, limit: int, budget: int
    ) -> tuple[tuple[tuple[Cell, ...], ...], bool, bool]:
        """Fetch up to `limit` rows, capping each cell and the rows to `budget` characters as
        they come, so no more than the budget and one row are ever held; with whether rows
        were left out, and whether the one row was narrowed to fit."""
        max_cell = self.limits.max_cell_chars
        rows = []
        while row is not None:
            if len(rows) == limit:
                return tuple(rows), True, False
            size = _row_size(row, max_cell)
            if size is None:
                row = tuple(_cap_cell(cell, max_cell) for cell in row)
                size = _row_size(row, None)
            if size > budget:
                if rows:
                    return tuple(rows), True, False
                # A single row wider than the whole budget: its texts share what is left.
                return (_narrowed(row, budget),), True, True
            budget -= size
            rows.append(row)
            if time.monotonic() > self._deadline:
                # Each row takes the GIL back, which another busy thread may hold for a while.
                raise sqlite3.OperationalError("interrupted")
            row = cursor.fetchone()
        return tuple(rows), False, False

    def _explain(self, error: sqlite3.Error) -> Exception:
        message = str(error)
        if self._late:
            message = "interrupted"
        if message == "out of memory":
            # SQLite's heap limit (set in sandbox workers) reported as a message rather than
            # as MemoryError (seen for a sort over a five-table cross join): the worker
            # answers both alike, with the memory budget, and retires.
            return MemoryError()
        if "one statement at a time" in message:
            return QueryRejectedError(
                "only one SQL statement per call is allowed; send them one at a time"
            )
        if message == "interrupted":
            return QueryTimeoutError.after(self.limits.timeout_s)
        if message == "user-defined function raised exception":
            return QueryRejectedError(
                "not allowed: the database's schema calls a function that cannot run here "
                f"({', '.join(sorted({name for name, _ in _UNINTERRUPTIBLE}))})"
            )
        if self._denied is not None or "not authorized" in message:
            return QueryRejectedError(
                f"not allowed: {self._denied or message}. Only read-only SELECT statements "
                "run here; use describe(table) for columns and keys"
            )
        if "readonly" in message or "query_only" in message:
            return QueryRejectedError(f"{message}: only read-only SELECT statements run here")
        if "too big" in message or "too long" in message:
            return QueryRejectedError(f"{message}: the statement or a value exceeds a size limit")
        if message.startswith("no such table"):
            message += (
                f"; tables are: {names_text(tuple(self._schema), MAX_LISTED_CHARS, ALL_TABLES)}"
            )
        elif message.startswith("no such column"):
            message += "; use describe(table) to see a table's columns"
        return QueryFailedError(message)


def _denied_action(action: int, arg1: str | None, arg2: str | None) -> str:
    if arg1 in _SCHEMA_TABLES and action in _SCHEMA_CHANGES:
        return _SCHEMA_CHANGES[action]
    return " ".join(part for part in (_ACTION_NAMES.get(action, str(action)), arg1, arg2) if part)


# The first thing SQLite asks of a statement that changes the schema is a write to the table
# that holds it, which would name the refusal "DELETE sqlite_master" for a DROP TABLE.
_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_temp_master"})
_SCHEMA_CHANGES = {
    sqlite3.SQLITE_INSERT: "CREATE (a change to the schema)",
    sqlite3.SQLITE_DELETE: "DROP (a change to the schema)",
    # What SQLite asks before it sets up a table-valued function for the first time.
    sqlite3.SQLITE_UPDATE: "table-valued functions (pragma_table_info, json_each, dbstat, ...)",
}


# What a result puts on the wire for a cell beyond its characters, in its text
# (`env_core.render.rows_text`) or in its structured rows' JSON (`env_core.render.rows_data`),
# whichever is longer: the " | " before it, or its quotes and the ", " after it, and a row's
# brackets; a text with control characters, bars, quotes or backslashes at six times its length
# (the text shows a control escaped, "\x01", and JSON writes "\u0001" and "\"" for a quote);
# a number or NULL at most as long as a float's repr. JSON is counted as written without
# escaping other characters (as the doors write it).
SEPARATOR_CHARS = 4
ESCAPE_FACTOR = 6
NUMBER_CHARS = 24


def _row_size(row: tuple, max_cell: int | None) -> int | None:
    """Characters the row adds to a result's text, and to its structured rows, at most, or
    None when a cell must be capped first.

    A plain loop: this runs for every fetched row, and is several times faster than
    generator expressions here.
    """
    size = SEPARATOR_CHARS * (len(row) + 1)
    for cell in row:
        if type(cell) is str:
            if max_cell is not None and len(cell) > max_cell:
                return None
            size += ESCAPE_FACTOR * len(cell) if _escaped(cell) else len(cell)
        elif type(cell) is bytes:
            return None
        else:
            size += NUMBER_CHARS
    return size


def _escaped(text: str) -> bool:
    """Whether a text is written longer than it is, in a result's text (control characters
    and bars, `env_core.render.cell_text`) or in JSON (control characters, quotes and
    backslashes): each such character then up to `ESCAPE_FACTOR` characters long."""
    return not text.isprintable() or "|" in text or '"' in text or "\\" in text


def _narrowed(row: tuple[Cell, ...], budget: int) -> tuple[Cell, ...]:
    """A row wider than `budget`, its texts cut to equal shares of what its numbers leave."""
    texts = sum(type(cell) is str for cell in row)
    numbers = (len(row) - texts) * (NUMBER_CHARS + SEPARATOR_CHARS)
    share = max(1, (budget - numbers) // max(texts, 1) - SEPARATOR_CHARS - 1)
    return tuple(_cut(cell, share) for cell in row)


def _cap_cell(cell: Cell | bytes, max_chars: int) -> Cell:
    if type(cell) is bytes:
        return f"<blob {len(cell)} bytes>"
    if type(cell) is str and len(cell) > max_chars:
        return f"{cell[:max_chars]}...[{len(cell) - max_chars} more chars]"
    return cell


def _cut(cell: Cell, max_chars: int) -> Cell:
    """A text cut short to show at most `max_chars` characters (escapes included) and "…"."""
    if type(cell) is not str:
        return cell
    if _escaped(cell):
        max_chars = max(1, max_chars // ESCAPE_FACTOR)
    return cell[:max_chars] + "…" if len(cell) > max_chars else cell


def _decode_with_replacement(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


class SchemaCache:
    """Table schemas per database file, read once with a private connection and shared.

    Only the newest schema of each file is kept: a file that changes (size or modification
    time) is read again, and its previous schema is let go.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._schemas: dict[str, tuple[tuple[int, int], dict[str, TableSchema]]] = {}

    def get(self, path: Path, *, immutable: bool, timeout_s: float) -> dict[str, TableSchema]:
        try:
            resolved, state = str(path.resolve()), file_state(path)
        except OSError as error:
            raise DataError(f"database file not found: {path}") from error
        with self._lock:
            cached = self._schemas.get(resolved)
            if cached is None or cached[0] != state:
                cached = state, read_schema(path, immutable=immutable, timeout_s=timeout_s)
                self._schemas[resolved] = cached
            return cached[1]


SCHEMAS = SchemaCache()

# Hidden columns (1: built with SQLITE_ENABLE_HIDDEN_COLUMNS) are not read by SELECT *;
# generated ones (2, 3) are.
_SHOWN_COLUMNS = (0, 2, 3)
_VIRTUAL_GENERATED = 2


def read_schema(path: Path, *, immutable: bool, timeout_s: float) -> dict[str, TableSchema]:
    """Every table and view, without compiling or running any SQL from the file's schema:
    only a plain table is read (its columns, keys and row count); the rest is described by
    its definition, and only the sandbox reads it."""
    connection = open_read_only(path, immutable=immutable)
    try:
        entries = connection.execute(
            "SELECT name, type, rootpage, sql FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
        ).fetchall()
        return {
            name: _entry_schema(connection, name, entry_type, rootpage, sql, timeout_s)
            for name, entry_type, rootpage, sql in entries
        }
    except sqlite3.DatabaseError as error:
        raise DataError(f"cannot read the schema of {path}: {error}") from error
    finally:
        connection.close()


# What SQLite's tokenizer skips before a token: whitespace and comments (an unclosed /* runs
# to the end), and what it reads as one word: identifier characters, every non-ASCII one
# included.
_GAP = re.compile(r"(?:[ \t\n\f\r]|--[^\n]*|/\*.*?(?:\*/|\Z))*", re.DOTALL)
_WORD = re.compile(r"[\w$\x80-\U0010ffff]*")
_KINDS = {
    ("create", "table"): "table",
    ("create", "view"): "view",
    ("create", "virtual"): "virtual table",
}


def _entry_schema(
    connection: sqlite3.Connection,
    name: str,
    entry_type: str,
    rootpage: Any,
    sql: str | None,
    timeout_s: float,
) -> TableSchema:
    """Read only what positively is a table stored in the file. Reading a view runs its SQL,
    and reading a virtual table runs its module, which may read a view (fts5's `content=`):
    both are described by their definition and read in the sandbox only."""
    # SQLite creates what the SQL says, having checked it against the entry's type and name.
    kind = _KINDS.get(_first_words(sql or "", 2), entry_type)
    stored = entry_type == "table" and type(rootpage) is int and rootpage > 0
    if kind == "table" and stored:
        return _read_table(connection, name, timeout_s)
    return TableSchema(name, (), (), None, computed=True, definition=sql or "", kind=kind)


def _first_words(sql: str, count: int) -> tuple[str, ...]:
    """The statement's first words in ASCII lower case, read the way SQLite's tokenizer
    reads them."""
    words: list[str] = []
    position = 0
    while len(words) < count:
        position = _GAP.match(sql, position).end()
        word = _WORD.match(sql, position).group()
        if not word:
            break
        words.append(_ascii_folded(word))
        position += len(word)
    return tuple(words)


def _read_table(connection: sqlite3.Connection, name: str, timeout_s: float) -> TableSchema:
    quoted = quote_identifier(name)
    listed = connection.execute(f"PRAGMA table_xinfo({quoted})").fetchall()
    columns = tuple(
        Column(name=col, type=kind or "", primary_key=pk > 0, not_null=bool(notnull))
        for _cid, col, kind, notnull, _default, pk, hidden in listed
        if hidden in _SHOWN_COLUMNS
    )
    foreign_keys = tuple(
        ForeignKey(column=row[3], ref_table=row[2], ref_column=row[4])
        for row in connection.execute(f"PRAGMA foreign_key_list({quoted})")
    )
    row_count = _count_rows(connection, quoted, timeout_s)
    computed = any(row[6] == _VIRTUAL_GENERATED for row in listed)
    return TableSchema(name, columns, foreign_keys, row_count, computed)


def _count_rows(connection: sqlite3.Connection, quoted: str, timeout_s: float) -> int | None:
    """The table's row count, or None when counting takes longer than `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    connection.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_OPCODES)
    try:
        # Without a WHERE clause SQLite counts in one step (OP_Count) that walks the whole
        # table and never calls the progress handler; with one it counts in a loop, which does.
        return connection.execute(f"SELECT count(*) FROM {quoted} WHERE 1").fetchone()[0]
    except sqlite3.OperationalError as error:
        if str(error) != "interrupted":
            raise
        return None
    finally:
        connection.set_progress_handler(None, 0)
