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
already run quickly on the same unchanging file (`env_core.reuse.ProvenStatements`).
Results read from an unchanging file are kept and given again without running any SQL
(`env_core.reuse.KeptResults`).
Functions that cannot be interrupted are replaced on every connection, so a schema expression
(a generated column or a view in the user's file) cannot call them either.
"""

from __future__ import annotations

import functools
import itertools
import sqlite3
import threading
import time
from pathlib import Path

from env_core import programs
from env_core.errors import (
    InvalidArgumentError,
    QueryFailedError,
    QueryRejectedError,
    QueryTimeoutError,
    SQLEnvError,
    UnknownTableError,
    shortened,
)
from env_core.executor_limits import ExecutorLimits
from env_core.read_only import (
    UNINTERRUPTIBLE,
    StatementGuard,
    file_state,
    harden,
    open_read_only,
    quote_identifier,
)
from env_core.render import (
    ALL_TABLES,
    MAX_LISTED_CHARS,
    QueryResult,
    TableSchema,
    names_text,
    visible,
)
from env_core.result_budget import fetch
from env_core.reuse import KEPT, PROVEN, CallKey
from env_core.sandbox import Job, Sandbox, Work, finish
from env_core.schemas import SCHEMAS, ascii_folded, first_words
from env_core.tools import SAMPLE_ROWS, check_text

# Bounds a row of a table sampled in process: columns x the value-size limit.
INLINE_SAMPLE_COLUMNS = 256
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
        self._guard = StatementGuard()
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
        harden(self._connection, self.limits, self._guard)
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
        self._table_names = {ascii_folded(name): name for name in self._known}
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
            table = self._table_names.get(ascii_folded(candidate))
            if table is not None:
                return table
        tables = names_text(tuple(schema), MAX_LISTED_CHARS, ALL_TABLES)
        raise UnknownTableError(
            f"no such table: {visible(shortened(name, 80))}; tables are: {tables}"
        )

    def describe(self, table: str) -> TableSchema:
        name = self.resolve_table(table)  # first: it may read a changed schema
        return self._schema[name]

    def sample(self, table: str, n: int = SAMPLE_ROWS) -> QueryResult:
        return finish(self.sample_work(self.describe(table), n))

    def query(self, sql: str, max_rows: int | None = None) -> QueryResult:
        return finish(self.query_work(sql, max_rows))

    def sample_work(
        self, schema: TableSchema, n: int = SAMPLE_ROWS, *, client: str | None = None
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
        worth = programs.worth_compiling(sql) and first_words(sql, 1) == ("select",)
        if not (self._plain_small_file and worth and PROVEN.trusted(key)):
            return False
        with self._lock:
            self._guard.start(time.monotonic() + programs.DEADLINE_S)
            try:
                program = self._uncached_connection().execute(f"EXPLAIN {sql}").fetchall()
            except sqlite3.Error:
                program = None
            late = time.monotonic() > self._guard.deadline
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

    def _run(self, sql: str, limit: int, *, deadline_s: float | None = None) -> QueryResult:
        """Run a statement here. Agent SQL that a sandbox would otherwise run (see
        `_in_process_s`) runs under its own deadline, on a connection that keeps no compiled
        statements, so that it leaves nothing behind (a cache of wide statements held ~45 MiB
        per database)."""
        self._follow_changes()
        with self._lock:
            started = time.monotonic()
            self._guard.start(
                started + (self.limits.timeout_s if deadline_s is None else deadline_s)
            )
            connection = self._connection if deadline_s is None else self._uncached_connection()
            try:
                columns, rows, truncated, narrowed = fetch(
                    connection, sql, limit, self.limits, self._guard.deadline
                )
            except sqlite3.Error as error:
                raise self._explain(error) from None
            elapsed_ms = (time.monotonic() - started) * 1000
            repeatable = self._guard.repeatable  # known only when compiled afresh
        return QueryResult(columns, rows, truncated, round(elapsed_ms, 3), repeatable, narrowed)

    def _uncached_connection(self) -> sqlite3.Connection:
        if not self._statement_cache:
            return self._connection
        if self._uncached is None:
            self._uncached = open_read_only(
                self.path, immutable=self.immutable, statement_cache=False
            )
            harden(self._uncached, self.limits, self._guard)
        return self._uncached

    def _explain(self, error: sqlite3.Error) -> Exception:
        message = str(error)
        if self._guard.late:
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
                f"({', '.join(sorted({name for name, _ in UNINTERRUPTIBLE}))})"
            )
        if self._guard.denied is not None or "not authorized" in message:
            return QueryRejectedError(
                f"not allowed: {self._guard.denied or message}. Only read-only SELECT statements "
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
