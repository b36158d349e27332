"""Tool results (a query's rows, a table's schema) and their renderings: compact text for
language models, plain data for programs.

Names and values come from databases and agents, and the text is shown in terminals and logs:
control characters in it are written as escapes (``\\x1b``, ``\\n``), never sent raw. The data
renderings keep every value exact.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# C0 controls but tab (harmless, and common in data), DEL and the C1 controls.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_ASCII_CONTROLS = bytes([*range(0x09), *range(0x0A, 0x20), 0x7F])

# The budget of every text a tool or an error returns, and of the structured data beside it
# (`ExecutorLimits.max_result_chars` is the rows' own, by default this).
MAX_TEXT_CHARS = 64_000
# A list of names in an error message (the tables when one is not found).
MAX_LISTED_CHARS = 4_000
# What a note on a cut takes at most.
NOTE_CHARS = 60
# Where to see every table when a list of them is cut.
ALL_TABLES = "tables: SELECT name FROM sqlite_master WHERE type = 'table' lists them"


Cell = int | float | str | None


@dataclass(frozen=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    truncated: bool
    elapsed_ms: float
    # Whether running the statement again does the same work: it called no function whose
    # value changes from run to run (`env_core.read_only.StatementGuard`). Known only where
    # statements are compiled afresh, as in a sandbox worker.
    repeatable: bool = True
    # Its one row was wider than the result's budget, and its texts were cut to fit.
    narrowed: bool = False

    @functools.cached_property
    def text(self) -> str:
        """The rows as a language model reads them, rendered once: a kept result is given
        again and again."""
        return rows_text(self)


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


def visible(text: str) -> str:
    """The text with its control characters escaped, as a terminal should show it."""
    if text.isprintable():
        return text
    return _CONTROL.sub(_escape, text)


def error_text(error: Exception) -> str:
    """An error as every door shows it to the agent."""
    return within_budget(f"Error: {visible(str(error))}")


def within_budget(text: str, budget: int = MAX_TEXT_CHARS) -> str:
    """The text, cut when it is longer than `budget` with a note saying how much was cut."""
    if len(text) <= budget:
        return text
    kept = budget - NOTE_CHARS
    return f"{text[:kept]}\n… ({len(text) - kept:,} more characters not shown)"


def names_fitting(names: Iterable[str], budget: int) -> int:
    """How many of the names, escaped and joined by ", ", fit in `budget` characters."""
    size = count = 0
    for name in names:
        size += len(visible(name)) + 2
        if size > budget:
            break
        count += 1
    return count


def names_text(names: Sequence[str], budget: int, rest: str) -> str:
    """Names escaped and joined by ", ", as many as fit in `budget` characters, then how many
    more there are and `rest`, where to see them (such as `ALL_TABLES`)."""
    shown = names_fitting(names, budget)
    listed = ", ".join(map(visible, names[:shown]))
    return listed if shown == len(names) else f"{listed} … and {len(names) - shown:,} more {rest}"


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
# What a description holds beside its columns and keys: its title, counts and notes; and what
# each column or key holds beside its names: its field names in the data, its flags in the text.
SCHEMA_FRAME_CHARS = 1_000
SCHEMA_PART_CHARS = 50


def schema_text(schema: TableSchema, notes: Mapping[str, str] | None = None) -> str:
    """The table's columns and keys; `notes` (by casefolded column name) follow a column as
    ``-- note``."""
    if schema.definition is not None:
        definition = schema.definition[:MAX_DEFINITION_CHARS]
        title = f"{schema.kind} {schema.name}: {_how_to_read(schema.kind)}"
        lines = [title, "definition:", *(f"  {line}" for line in definition.splitlines())]
        if cut := len(schema.definition) - len(definition):
            lines.append(f"  … ({cut:,} more characters of the definition not shown)")
        return within_budget(_visible_lines(lines))
    columns, keys = schema.shown
    lines = [f"table {schema.name}: {row_count_text(schema.row_count)}", "columns:"]
    for column in schema.columns[:columns]:
        flags = [column.type or "untyped"]
        if column.primary_key:
            flags.append("primary key")
        if column.not_null:
            flags.append("not null")
        note = notes.get(column.name.casefold()) if notes else None
        lines.append(f"  {column.name} {' '.join(flags)}" + (f"  -- {note}" if note else ""))
    lines.extend(_not_shown(len(schema.columns) - columns, "columns"))
    if schema.foreign_keys:
        lines.append("foreign keys:")
        lines.extend(
            f"  {fk.column} -> {fk.ref_table}.{fk.ref_column or '(primary key)'}"
            for fk in schema.foreign_keys[:keys]
        )
        lines.extend(_not_shown(len(schema.foreign_keys) - keys, "foreign keys"))
    return within_budget(_visible_lines(lines))


def _not_shown(count: int, what: str) -> list[str]:
    if not count:
        return []
    return [
        f"  … and {count:,} more {what}, not shown: a description holds at most "
        f"{MAX_TEXT_CHARS:,} characters"
    ]


def schema_parts_shown(schema: TableSchema) -> tuple[int, int]:
    """How many of a table's columns, then of its foreign keys, its renderings show: as many
    as fit in the budget, each counted as its JSON in the data (which is never shorter than
    its line of text) and the field names around it."""
    budget = MAX_TEXT_CHARS - SCHEMA_FRAME_CHARS - 2 * _json_chars([schema.name])
    sizes = [_json_chars([c.name, c.type]) for c in schema.columns]
    sizes += [_json_chars([k.column, k.ref_table, k.ref_column]) for k in schema.foreign_keys]
    fitting = 0
    for size in sizes:
        budget -= size + SCHEMA_PART_CHARS
        if budget < 0:
            break
        fitting += 1
    columns = min(fitting, len(schema.columns))
    return columns, fitting - columns


def _json_chars(values: list[str | None]) -> int:
    return len(json.dumps(values, ensure_ascii=False))


def _how_to_read(kind: str) -> str:
    # Connecting a virtual table asks to write sqlite_master, which the executor refuses.
    if kind == "virtual table":
        return "virtual tables cannot be sampled or queried here"
    return "sample or query it to see its columns"


def row_count_text(row_count: int | None) -> str:
    """A table's size as every tool shows it (None: not counted within the query timeout)."""
    return "too many rows to count in time" if row_count is None else f"{row_count} rows"


def tables_shown(tables: Sequence[str]) -> int:
    """How many of a database's tables the opening observation lists: half its budget."""
    return names_fitting(tables, MAX_TEXT_CHARS // 2)


def start_text(
    question: str, db_id: str, tables: Sequence[str], budget: int, tools: str, evidence: str = ""
) -> str:
    """The opening an agent reads; `tools`: the tools as calls (`tools.call_forms`)."""
    listed = names_text(tables, MAX_TEXT_CHARS // 2, ALL_TABLES)
    lines = evidence.splitlines()  # a document (Spider 2.0-lite) spans lines
    return within_budget(
        _visible_lines(
            [
                f"Question: {question}",
                *(f"{'Evidence: ' if i == 0 else ''}{line}" for i, line in enumerate(lines)),
                f"Database: {db_id}",
                f"Tables: {listed}",
                f"You have {budget} steps. Tools: {tools}. Each call is one step; answer ends "
                "the episode.",
            ]
        )
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
    """The table as programs read it: what its text shows, and whether parts were left out."""
    definition = schema.definition
    view = {"definition": definition[:MAX_DEFINITION_CHARS]} if definition is not None else {}
    columns, keys = schema.shown
    return {
        "table": schema.name,
        **view,
        "row_count": schema.row_count,
        "columns": [
            {"name": c.name, "type": c.type, "primary_key": c.primary_key}
            for c in schema.columns[:columns]
        ],
        "foreign_keys": [
            {"column": fk.column, "ref_table": fk.ref_table, "ref_column": fk.ref_column}
            for fk in schema.foreign_keys[:keys]
        ],
        "truncated": (columns, keys) != (len(schema.columns), len(schema.foreign_keys))
        or len(definition or "") > MAX_DEFINITION_CHARS,
    }
