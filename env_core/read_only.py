"""SQLite connections that can only read, enforced by SQLite itself rather than by keyword
checks (see `env_core.executor` for the layers), and names quoted rather than pasted into SQL.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from env_core.errors import DataError
from env_core.executor_limits import ExecutorLimits

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
PROGRESS_OPCODES = 200


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


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
    for name, arity in UNINTERRUPTIBLE:
        connection.create_function(name, arity, _refuse(name))
    return connection


def _in_wal_mode(path: Path) -> bool:
    with path.open("rb") as handle:
        header = handle.read(20)
    return len(header) == 20 and header[18:20] == b"\x02\x02"


# Replaced on every connection, so that no SQL, the schema's included, can call them.
UNINTERRUPTIBLE = (("printf", -1), ("format", -1), ("load_extension", 1), ("load_extension", 2))


def _refuse(name: str):
    def refuse(*_args: Any) -> None:
        raise sqlite3.OperationalError(f"{name} is not allowed")

    return refuse


def file_state(path: Path) -> tuple[int, int, int, int]:
    """What changes when another program writes or replaces the file: which file it is, its
    size and its modification time."""
    stat = path.stat()
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


class StatementGuard:
    """What the authorizer and the progress handler of hardened connections know of the
    statement running on them: its deadline (monotonic), whether compiling it ran past that,
    the first action refused, and whether it calls a function whose value changes from run to
    run (chance, the clock)."""

    def __init__(self) -> None:
        self.start(0.0)

    def start(self, deadline: float) -> None:
        self.deadline = deadline
        self.late = False
        self.denied: str | None = None
        self.repeatable = True

    def authorize(self, action: int, arg1, arg2, _db, _trigger) -> int:
        # Compiling never calls the progress handler; it calls this, which needs the GIL back
        # each time: past the deadline, compiling stops here.
        if time.monotonic() > self.deadline:
            self.late = True
            return sqlite3.SQLITE_DENY
        denied = False
        if action == sqlite3.SQLITE_FUNCTION:
            function = arg2.lower()
            self.repeatable &= function not in _UNREPEATABLE_FUNCTIONS
            denied = function in _DENIED_FUNCTIONS
        if action in _ALLOWED_ACTIONS and not denied:
            return sqlite3.SQLITE_OK
        if self.denied is None:  # the first refusal names what the statement tried to do
            self.denied = _denied_action(action, arg1, arg2)
        return sqlite3.SQLITE_DENY

    def past_deadline(self) -> int:
        return 1 if time.monotonic() > self.deadline else 0


def harden(connection: sqlite3.Connection, limits: ExecutorLimits, guard: StatementGuard) -> None:
    """Switch on every read-only layer but the file's mode, `guard` deciding each action and
    stopping a statement past its deadline."""
    connection.execute("PRAGMA query_only = ON")
    connection.execute("PRAGMA temp_store = MEMORY")  # sorts never write temporary files
    connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    connection.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, limits.max_sql_chars * 4)
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_value_bytes)
    connection.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, limits.max_like_pattern_bytes)
    connection.set_authorizer(guard.authorize)
    connection.set_progress_handler(guard.past_deadline, PROGRESS_OPCODES)


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
