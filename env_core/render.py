"""Renderings of tool results: compact text for language models, plain data for programs.

Names and values come from databases and agents, and the text is shown in terminals and logs:
control characters in it are written as escapes (``\\x1b``, ``\\n``), never sent raw. The data
renderings keep every value exact.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from env_core.executor import Cell, QueryResult, TableSchema

# C0 controls but tab (harmless, and common in data), DEL and the C1 controls.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_ASCII_CONTROLS = bytes([*range(0x09), *range(0x0A, 0x20), 0x7F])


def visible(text: str) -> str:
    """The text with its control characters escaped, as a terminal should show it."""
    if text.isprintable():
        return text
    return _CONTROL.sub(_escape, text)


def error_text(error: Exception) -> str:
    """An error as every door shows it to the agent."""
    return f"Error: {visible(str(error))}"


def _escape(control: re.Match[str]) -> str:
    char = control.group()
    return "\\n" if char == "\n" else f"\\x{ord(char):02x}"


def cell_text(cell: Cell) -> str:
    if type(cell) is str:
        if "|" in cell or not cell.isprintable():
            return visible(cell).replace("|", "\\|")
        return cell
    return "NULL" if cell is None else repr(cell)


def row_text(row: tuple[Cell, ...]) -> str:
    # cell_text inlined for the common cells: this runs for every cell shown.
    return " | ".join(
        [
            (c if "|" not in c and c.isprintable() else cell_text(c))
            if type(c) is str
            else ("NULL" if c is None else str(c))
            for c in row
        ]
    )


def rows_text(result: QueryResult) -> str:
    lines = [visible(" | ".join(result.columns))]
    lines.extend([row_text(row) for row in result.rows])
    count = len(result.rows)
    rows = f"{count} row{'' if count == 1 else 's'}"
    if result.narrowed:
        lines.append(f"({rows} shown, its values cut short to fit: select fewer columns)")
    elif result.truncated:
        lines.append(f"({rows} shown; more exist: add a LIMIT/OFFSET, filter or aggregate)")
    else:
        lines.append(f"({rows})")
    return "\n".join(lines)


MAX_DEFINITION_CHARS = 2_000


def schema_text(schema: TableSchema, notes: Mapping[str, str] | None = None) -> str:
    """The table's columns and keys; `notes` (by casefolded column name) follow a column as
    ``-- note``."""
    if schema.definition is not None:
        definition = schema.definition[:MAX_DEFINITION_CHARS]
        title = f"{schema.kind} {schema.name}: {_how_to_read(schema.kind)}"
        lines = [title, "definition:", *(f"  {line}" for line in definition.splitlines())]
        return _visible_lines(lines)
    lines = [f"table {schema.name}: {row_count_text(schema.row_count)}", "columns:"]
    for column in schema.columns:
        flags = [column.type or "untyped"]
        if column.primary_key:
            flags.append("primary key")
        if column.not_null:
            flags.append("not null")
        note = notes.get(column.name.casefold()) if notes else None
        lines.append(f"  {column.name} {' '.join(flags)}" + (f"  -- {note}" if note else ""))
    if schema.foreign_keys:
        lines.append("foreign keys:")
        lines.extend(
            f"  {fk.column} -> {fk.ref_table}.{fk.ref_column or '(primary key)'}"
            for fk in schema.foreign_keys
        )
    return _visible_lines(lines)


def _how_to_read(kind: str) -> str:
    # Connecting a virtual table asks to write sqlite_master, which the executor refuses.
    if kind == "virtual table":
        return "virtual tables cannot be sampled or queried here"
    return "sample or query it to see its columns"


def row_count_text(row_count: int | None) -> str:
    """A table's size as every tool shows it (None: not counted within the query timeout)."""
    return "too many rows to count in time" if row_count is None else f"{row_count} rows"


def start_text(
    question: str, db_id: str, tables: Sequence[str], budget: int, evidence: str = ""
) -> str:
    lines = evidence.splitlines()  # a document (Spider 2.0-lite) spans lines
    return _visible_lines(
        [
            f"Question: {question}",
            *(f"{'Evidence: ' if i == 0 else ''}{line}" for i, line in enumerate(lines)),
            f"Database: {db_id}",
            f"Tables: {', '.join(tables)}",
            f"You have {budget} steps. Tools: describe(table), sample(table, n), query(sql), "
            "answer(value). Each call is one step; answer ends the episode.",
        ]
    )


def _visible_lines(lines: list[str]) -> str:
    """The lines as one text, a line holding a control character (a newline in a name
    included) with it escaped."""
    text = "\n".join(lines)
    if text.isascii():  # most text: one pass in C deletes the controls, separators included
        plain = len(text) - len(text.encode().translate(None, _ASCII_CONTROLS)) == len(lines) - 1
    else:
        plain = all(map(str.isprintable, lines))
    return text if plain else "\n".join(map(visible, lines))


def rows_data(result: QueryResult) -> dict[str, Any]:
    return {
        "columns": list(result.columns),
        "rows": [list(row) for row in result.rows],
        "truncated": result.truncated,
        "elapsed_ms": result.elapsed_ms,
    }


def schema_data(schema: TableSchema) -> dict[str, Any]:
    view = {"definition": schema.definition} if schema.definition is not None else {}
    return {
        "table": schema.name,
        **view,
        "row_count": schema.row_count,
        "columns": [
            {"name": c.name, "type": c.type, "primary_key": c.primary_key} for c in schema.columns
        ],
        "foreign_keys": [
            {"column": fk.column, "ref_table": fk.ref_table, "ref_column": fk.ref_column}
            for fk in schema.foreign_keys
        ],
    }
