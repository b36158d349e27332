"""Renderings of tool results: compact text for language models, plain data for programs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from env_core.executor import Cell, QueryResult, TableSchema


def cell_text(cell: Cell) -> str:
    if type(cell) is str:
        if "\n" in cell or "|" in cell:
            return cell.replace("\n", "\\n").replace("|", "\\|")
        return cell
    return "NULL" if cell is None else repr(cell)


def row_text(row: tuple[Cell, ...]) -> str:
    # cell_text inlined for the common cells: this runs for every cell shown.
    return " | ".join(
        [
            (c if "|" not in c and "\n" not in c else cell_text(c))
            if type(c) is str
            else ("NULL" if c is None else str(c))
            for c in row
        ]
    )


def rows_text(result: QueryResult) -> str:
    lines = [" | ".join(result.columns)]
    lines.extend([row_text(row) for row in result.rows])
    count = len(result.rows)
    if result.truncated:
        lines.append(f"({count} rows shown; more exist: add a LIMIT/OFFSET, filter or aggregate)")
    else:
        lines.append(f"({count} row{'' if count == 1 else 's'})")
    return "\n".join(lines)


def schema_text(schema: TableSchema) -> str:
    lines = [f"table {schema.name}: {schema.row_count} rows", "columns:"]
    for column in schema.columns:
        flags = [column.type or "untyped"]
        if column.primary_key:
            flags.append("primary key")
        if column.not_null:
            flags.append("not null")
        lines.append(f"  {column.name} {' '.join(flags)}")
    if schema.foreign_keys:
        lines.append("foreign keys:")
        lines.extend(
            f"  {fk.column} -> {fk.ref_table}.{fk.ref_column or '(primary key)'}"
            for fk in schema.foreign_keys
        )
    return "\n".join(lines)


def start_text(question: str, db_id: str, tables: Sequence[str], budget: int) -> str:
    return (
        f"Question: {question}\n"
        f"Database: {db_id}\n"
        f"Tables: {', '.join(tables)}\n"
        f"You have {budget} steps. Tools: describe(table), sample(table, n), query(sql), "
        "answer(value). Each call is one step; answer ends the episode."
    )


def rows_data(result: QueryResult) -> dict[str, Any]:
    return {
        "columns": list(result.columns),
        "rows": [list(row) for row in result.rows],
        "truncated": result.truncated,
        "elapsed_ms": result.elapsed_ms,
    }


def schema_data(schema: TableSchema) -> dict[str, Any]:
    return {
        "table": schema.name,
        "row_count": schema.row_count,
        "columns": [
            {"name": c.name, "type": c.type, "primary_key": c.primary_key} for c in schema.columns
        ],
        "foreign_keys": [
            {"column": fk.column, "ref_table": fk.ref_table, "ref_column": fk.ref_column}
            for fk in schema.foreign_keys
        ],
    }
