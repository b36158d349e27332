"""Table schemas read from a database file without running any SQL from its schema, and
shared by every executor of the file (`SCHEMAS`)."""

from __future__ import annotations

import re
import sqlite3
import string
import threading
import time
from pathlib import Path
from typing import Any

from env_core.errors import DataError
from env_core.read_only import PROGRESS_OPCODES, file_state, open_read_only, quote_identifier
from env_core.render import Column, ForeignKey, TableSchema

_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def ascii_folded(text: str) -> str:
    """The text as SQLite compares names and keywords: ASCII letters in lower case, every
    other character as it is (so "STRASSE" and "straße" stay two names)."""
    return text.translate(_ASCII_LOWER)


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
    kind = _KINDS.get(first_words(sql or "", 2), entry_type)
    stored = entry_type == "table" and type(rootpage) is int and rootpage > 0
    if kind == "table" and stored:
        return _read_table(connection, name, timeout_s)
    return TableSchema(name, (), (), None, computed=True, definition=sql or "", kind=kind)


def first_words(sql: str, count: int) -> tuple[str, ...]:
    """The statement's first words in ASCII lower case, read the way SQLite's tokenizer
    reads them."""
    words: list[str] = []
    position = 0
    while len(words) < count:
        position = _GAP.match(sql, position).end()
        word = _WORD.match(sql, position).group()
        if not word:
            break
        words.append(ascii_folded(word))
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
    connection.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_OPCODES)
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
