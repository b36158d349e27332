"""Agent SQL whose work is bounded by what SQLite compiled it to, before it has ever run.

A sandbox worker bounds any statement (see `env_core.sandbox`), and one it ran quickly may run
in process after (`reuse.ProvenStatements`). Some statements need no worker even the first
time, and this module tells which, in two steps:

1. `worth_compiling`: compiling the statement takes little, by its text alone. What makes a
   short statement costly to prepare is a name that expands (a common table expression, a
   view) or a subquery flattened into another, an alias copied wherever it is named, and
   joins whose columns are matched by name or planned among many tables or conditions. So:
   one SELECT, no WITH, at most `MAX_TABLES` tables, none joined NATURAL or USING, and at most
   `MAX_SQL_CHARS` characters (the costliest of a few thousand statements crafted to compile
   slowly took 0.7 ms at 200 characters, 56 ms at 600). Words inside quotes count too, which
   only sends more to the sandbox. (Views the executor rules out by the file: see
   `ReadOnlyExecutor`.) Nor is a statement compiled here whose words nearly always make a
   program that is not bounded (`UNBOUNDED_WORDS`): finding out costs a tenth of a worker's
   run.
2. `runs_bounded`: the program SQLite compiled (as `EXPLAIN` lists it) holds nothing that
   grows with the data. It reads through cursors, seeks, compares, counts and returns rows of
   at most `MAX_RESULT_COLUMNS` values: no temporary table, sorter or subroutine, and no value
   made bigger than the values it read (no function but a few aggregates, no `||`). Its memory
   is then its registers, the page cache and one row; its time is bounded by the progress
   handler's deadline, but for a single step over the whole file (counting a table's rows),
   which a file of at most `MAX_FILE_BYTES` keeps short.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_TABLES = 4
MAX_SQL_CHARS = 200
MAX_FILE_BYTES = 4 << 20
MAX_RESULT_COLUMNS = 256
# How long compiling a statement here, then running it, may each take. 96% of the Spider gold
# queries that compile to bounded programs ran within it the first time (the median in 0.04 ms);
# a statement slower than it looked costs the caller's thread (a server's event loop) no more
# than a cheap call does before it goes to the sandbox, however often its text is varied.
DEADLINE_S = 0.000_25

BOUNDED_OPCODES = frozenset(
    {
        # control
        "Init", "Goto", "Halt", "Transaction", "Noop", "Once",
        # cursors on the file's tables and indexes
        "OpenRead", "Close", "Rewind", "Last", "Next", "Prev", "NullRow", "IfNullRow",
        "SeekRowid", "NotExists", "SeekGE", "SeekGT", "SeekLE", "SeekLT",
        "IdxGE", "IdxGT", "IdxLE", "IdxLT", "DeferredSeek", "IdxRowid", "Rowid", "Column",
        # values of the statement's own text, and registers
        "Integer", "Int64", "Real", "String8", "String", "Null", "Copy", "SCopy", "Move",
        # comparisons, logic and arithmetic
        "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "ElseEq", "If", "IfNot", "IsNull", "NotNull",
        "IsTrue", "Not", "And", "Or", "BitAnd", "BitOr", "BitNot", "ShiftLeft", "ShiftRight",
        "Add", "Subtract", "Multiply", "Divide", "Remainder",
        "Cast", "Affinity", "RealAffinity", "MustBeInt", "CollSeq",
        # LIMIT and OFFSET, counting and aggregates
        "DecrJumpZero", "IfPos", "IfNotZero", "OffsetLimit",
        "Count", "AggStep", "AggFinal", "ZeroOrNull",
        "ResultRow",
    }
)  # fmt: skip
BOUNDED_AGGREGATES = frozenset({"count", "min", "max", "sum", "avg", "total"})
# A sorter, a temporary table, a function or a growing value, most often.
UNBOUNDED_WORDS = ("ORDER BY", "GROUP BY", "DISTINCT", " LIKE ", "||")


def worth_compiling(sql: str) -> bool:
    """Whether to compile `sql` here to see if it is bounded: compiling it is cheap by its
    text, and it may well be (see the module's note)."""
    words = sql.upper()
    if len(sql) > MAX_SQL_CHARS or words.count("SELECT") != 1:
        return False
    if any(word in words for word in ("WITH", "NATURAL", "USING", *UNBOUNDED_WORDS)):
        return False
    # The FROM clause is in what follows the first FROM, even when that one was inside quotes.
    from_on = words[words.find("FROM") :] if "FROM" in words else ""
    return from_on.count(",") + from_on.count("JOIN") < MAX_TABLES


def runs_bounded(program: Iterable[tuple]) -> bool:
    """Whether an `EXPLAIN` listing (address, opcode, p1, p2, p3, p4, ...) only reads,
    compares and counts (see the module's note).

    Fields are read by index: unpacking each row into names (its rest into a list) took five
    times as long, on a path that runs for every new statement compiled here."""
    for row in program:
        opcode = row[1]
        if opcode not in BOUNDED_OPCODES:
            return False
        if opcode == "AggStep" and str(row[5]).partition("(")[0] not in BOUNDED_AGGREGATES:
            return False
        if opcode == "ResultRow" and row[3] > MAX_RESULT_COLUMNS:
            return False
    return True
