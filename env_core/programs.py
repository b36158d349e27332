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
   grows faster than the time it runs. It reads through cursors, seeks, compares, counts and
   returns rows of at most `MAX_RESULT_COLUMNS` values, and makes no value bigger than the
   values it read (no function but a few aggregates, no `||`). Its memory is its registers,
   the page cache, one row, and the records it gathers into a sorter or a temporary table or
   index (`ORDER BY`, `GROUP BY`, `DISTINCT`, an `IN` list, an automatic index); its time is
   the progress handler's deadline and one step it cannot stop. The bound, made sure of by
   attack (docs/profiles.md, "Checked since"):

   - A record is made by one opcode from at most `MAX_RESULT_COLUMNS` registers, and SQLite
     refuses one longer than the value-size limit (`ExecutorLimits.max_value_bytes`, 20,000
     bytes), whatever it holds: values read from the file, the statement's constants, their
     arithmetic.
   - Each record goes in by one opcode of a loop that made it first. The progress handler
     counts opcodes and, once `PROGRESS_OPCODES` (200) have run, at the next loop's end stops
     the statement past its deadline (`DEADLINE_S`); `temp_store = MEMORY` writes nothing to
     a file. So a statement holds what it gathered before its deadline, each byte copied at
     least twice on the way (a 20,000-byte record took 4.5 us: ~60 of them), and what 200
     more opcodes add, at least two to a record (at most 100 of 20,000 bytes, 2 MB). The
     worst measured: 3-4 MiB resident over the start at the peak, a bounded scan's 2.
   - Sorting what was gathered (the sorter's sort, a temporary index's insert) is one step
     the handler cannot stop: n log2 n comparisons, each reading at most the shorter record.
     Compared as bytes (BINARY, the only collation `compares_bytes` lets a key use), that is
     at most log2 n passes over the bytes gathered, each faster than copying them was; the
     slowest sort measured, of what was gathered just before the deadline, ended at 0.41 ms
     at the median (a bounded scan stops at 0.45). NOCASE and RTRIM compare character by
     character: 20 records of 19,000 bytes took 1.2 ms to sort, 190 took 27.
   - A Bloom filter (`Blob`) is sized from the file's statistics (up to 10 MB, zeroed in one
     step): at most `MAX_BLOB_BYTES`, which SQLite's smallest (10,000 bytes) is within.

   Nothing else that holds rows is admitted: no window (`AggValue`), co-routine or table
   of rows (`Insert`), which a statement of one SELECT rarely makes.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_TABLES = 4
MAX_SQL_CHARS = 200
MAX_FILE_BYTES = 4 << 20
MAX_RESULT_COLUMNS = 256
MAX_BLOB_BYTES = 1 << 16
# How long compiling a statement here, then running it, may each take. 96% of the Spider gold
# queries that compile to bounded programs ran within it the first time (the median in 0.04 ms);
# a statement slower than it looked costs the caller's thread (a server's event loop) no more
# than a cheap call does before it goes to the sandbox, however often its text is varied.
DEADLINE_S = 0.000_25

BOUNDED_OPCODES = frozenset(
    {
        # control
        "Init", "Goto", "Halt", "Transaction", "Noop", "Explain", "Once",
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
# What a sorter or a temporary table or index holds, and the subroutines that feed it (see the
# module's note): the records it holds, of the registers' values.
GATHERING_OPCODES = frozenset(
    {
        # records, sorted: ORDER BY, GROUP BY
        "MakeRecord", "SorterOpen", "SorterInsert", "SorterSort", "Sort", "SorterData",
        "SorterNext", "SorterCompare", "OpenPseudo", "Sequence", "SequenceTest",
        # temporary tables and indexes: DISTINCT, IN (...), ORDER BY ... LIMIT, automatic
        # indexes and their Bloom filters
        "OpenEphemeral", "OpenAutoindex", "IdxInsert", "IdxDelete", "Delete", "Found",
        "NotFound", "NoConflict", "RowData", "Blob", "FilterAdd", "Filter",
        # groups: one subroutine ends a group, another starts the next
        "Compare", "Jump", "Gosub", "Return", "BeginSubrtn", "AddImm",
    }
)  # fmt: skip
ADMITTED_OPCODES = BOUNDED_OPCODES | GATHERING_OPCODES
# The cursors whose keys a sort or an insert compares, as their KeyInfo (p4) names the collations.
KEYED_OPCODES = frozenset({"SorterOpen", "OpenEphemeral", "OpenAutoindex", "Compare"})
# Opcodes admitted within a bound their operands show (see `within_bounds`).
CHECKED_OPCODES = frozenset({"AggStep", "ResultRow", "MakeRecord", "Blob"}) | KEYED_OPCODES
BOUNDED_AGGREGATES = frozenset({"count", "min", "max", "sum", "avg", "total"})
# A function or a growing value, most often.
UNBOUNDED_WORDS = (" LIKE ", "||")


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
    compares, counts and gathers what time bounds (see the module's note).

    Fields are read by index: unpacking each row into names (its rest into a list) took five
    times as long, on a path that runs for every new statement compiled here."""
    for row in program:
        opcode = row[1]
        if opcode not in ADMITTED_OPCODES:
            return False
        if opcode in CHECKED_OPCODES and not within_bounds(opcode, row):
            return False
    return True


def within_bounds(opcode: str, row: tuple) -> bool:
    """Whether an opcode of `CHECKED_OPCODES` stays within its bound: an aggregate of
    `BOUNDED_AGGREGATES`, a row or record of at most `MAX_RESULT_COLUMNS` values, a blob of at
    most `MAX_BLOB_BYTES`, keys compared as bytes."""
    if opcode == "AggStep":
        return str(row[5]).partition("(")[0] in BOUNDED_AGGREGATES
    if opcode in ("ResultRow", "MakeRecord"):
        return row[3] <= MAX_RESULT_COLUMNS
    if opcode == "Blob":
        return row[2] <= MAX_BLOB_BYTES
    return compares_bytes(row[5])


def compares_bytes(key_info: object) -> bool:
    """Whether a KeyInfo as `EXPLAIN` shows it ("k(2,B,-B)") compares every field as bytes
    (BINARY), descending or nulls last too."""
    fields = str(key_info).removeprefix("k(").removesuffix(")").split(",")[1:]
    return all(field.lstrip("-").removeprefix("N.") in ("", "B") for field in fields)
