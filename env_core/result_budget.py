"""A statement's result read within its budget: rows sized as they are fetched, cells capped,
and a row wider than the whole budget narrowed, so no more than the budget and one row are ever
held; text that is not UTF-8 read with its bad bytes replaced."""

from __future__ import annotations

import sqlite3
import time

from env_core.executor_limits import ExecutorLimits
from env_core.render import Cell

# What a statement read: its columns, its rows, whether rows were left out, and whether its
# one row was narrowed to fit (see `QueryResult`).
Fetched = tuple[tuple[str, ...], tuple[tuple[Cell, ...], ...], bool, bool]


def fetch(
    connection: sqlite3.Connection, sql: str, limit: int, limits: ExecutorLimits, deadline: float
) -> Fetched:
    """Run `sql` and read up to `limit` rows within `limits`, until `deadline` (monotonic)."""
    try:
        return _read(connection, sql, limit, limits, deadline)
    except sqlite3.OperationalError as error:
        if not str(error).startswith("Could not decode"):
            raise
    # Text that is not UTF-8 in some row: read again, the bad bytes replaced.
    connection.text_factory = _decode_with_replacement
    try:
        return _read(connection, sql, limit, limits, deadline)
    finally:
        connection.text_factory = str


def _read(
    connection: sqlite3.Connection, sql: str, limit: int, limits: ExecutorLimits, deadline: float
) -> Fetched:
    cursor = connection.execute(sql)
    first = cursor.fetchone()
    columns = _column_names(cursor.description or (), limits)
    budget = limits.max_result_chars - _row_size(columns, None)
    return columns, *_capped_rows(first, cursor, limit, budget, limits.max_cell_chars, deadline)


def _column_names(description: tuple, limits: ExecutorLimits) -> tuple[str, ...]:
    """The result's column names, each capped like a cell. They count toward the result's
    budget and may take half of it: past that, each is cut to an equal share (a statement
    can read one long name hundreds of times, `SELECT * FROM t, t AS t2, ...`)."""
    names = tuple(_cap_cell(column[0], limits.max_cell_chars) for column in description)
    half = limits.max_result_chars // 2
    if _row_size(names, None) > half:
        return _narrowed(names, half)
    return names


def _capped_rows(
    row: tuple | None,
    cursor: sqlite3.Cursor,
    limit: int,
    budget: int,
    max_cell: int,
    deadline: float,
) -> tuple[tuple[tuple[Cell, ...], ...], bool, bool]:
    """Fetch up to `limit` rows, capping each cell and the rows to `budget` characters as
    they come, so no more than the budget and one row are ever held; with whether rows
    were left out, and whether the one row was narrowed to fit."""
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
        if time.monotonic() > deadline:
            # Each row takes the GIL back, which another busy thread may hold for a while.
            raise sqlite3.OperationalError("interrupted")
        row = cursor.fetchone()
    return tuple(rows), False, False


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
