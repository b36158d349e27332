"""Decide whether an agent's answer equals the gold result of a question.

The gold result is what the gold SQL returned (`GoldAnswer`). Its kind is ``scalar`` (one row,
one column), ``list`` (one column, several rows) or ``table`` (several columns). A gold result
that is empty or entirely NULL is refused when constructed (such questions are excluded
upstream), so an empty answer can never be right by matching an empty gold.

Reading the answer. Nothing is evaluated, `AnswerChecker.check` never raises on bad input,
and reading takes time linear in the answer's length, whatever its shape.

* A string longer than ``max_chars`` is wrong. Surrounding whitespace, a Markdown code fence
  (```` ```json ... ``` ````; a first line that starts with a letter is its language tag) and
  a leading ``Answer:`` or ``Final answer:`` (any case, optionally in ``**bold**``) are
  removed. An empty answer (``""``, ``[]``, ``{}``) is always wrong.
* If the text is JSON it is read as JSON; numbers keep the decimals they were written with.
  Otherwise it is read as plain text, guided by the gold kind. Scalar: the whole text is one
  value. List: one item per line, or, on a single line, items separated by the first of ``|``,
  tab, ``;``, ``,`` that occurs. Table: one row per line, cells split the same way. A Markdown
  table's outer pipes, header row and ``---`` rule are dropped, and so is a leading ``-``,
  ``*`` or ``•`` bullet. A comma between a digit group and exactly three digits is a thousands
  separator (``1,234,567`` is one number, and so is ``100,200``: write JSON or ``100, 200``).
  One pair of matching quotes (``'``, ``"`` or a backtick) around an item is removed; an
  unquoted ``NULL``, ``null`` or ``None`` is NULL.
* A value that is not a string (number, None, list, tuple, dict, Decimal) is serialised to JSON
  and read as JSON, under the same size limit.
* Shapes: a dict with one key stands for its value (``{"answer": 42}``); any other dict is one
  row of its values in order; a list of lists or dicts is a list of rows; a flat list is one
  value per row, except for a one-row table gold, where it is that row. A scalar gold thus
  accepts ``42``, ``"42"``, ``[42]``, ``[[42]]`` and ``{"answer": 42}``; a list gold accepts
  ``[a, b]`` and ``[[a], [b]]``.

Comparing cells.

* NULL equals only NULL: not 0, not ``""``, not the JSON string ``"null"``.
* A string that is a plain number (optional sign, digits without leading zeros and with
  optional ``,`` thousands groups, optional fraction and exponent) is that number, on either
  side: TEXT ``"1990"`` matches ``1990`` and ``"1,234"`` matches ``1234``. ``"007"``, ``"45%"``
  and ``"$3"`` stay strings: no units or percent signs are stripped.
* Other strings match case-insensitively (``casefold``) after stripping and collapsing runs of
  whitespace to one space. A number never equals a non-numeric string.
* An integer gold cell (INTEGER, or integer text) must be matched exactly: 5 matches ``5.0`` and
  ``"5"`` but not ``5.0001``. JSON ``true``/``false`` are 1/0.
* A real gold cell ``g`` (REAL, or text with a fraction or exponent) is matched by a number
  ``a`` in two ways only. Float noise: ``|a - g| <= max(1e-12 * |g|, 1e-9)``, the two agree to
  twelve significant digits (a sum added up in another order). Rounding: ``a`` is written with
  ``d`` decimals, 2 <= d <= 15, and equals ``g`` (as its shortest repr) rounded to ``d``
  decimals half-even or half-up, that rounding not being zero. So ``4`` matches 4.0, 78.78
  matches 78.783333, 0.12 matches 0.1234 and 0.13 matches 0.125; 78.8 does not match 78.783333
  (one decimal is too coarse), 0.00 does not match 0.004, and 19501 does not match 19500.0:
  no relative tolerance lets a large number be off by units. A float passed as a Python value
  counts the decimals of its repr.

Comparing results.

* The answer must have as many rows and columns as the gold. A gold of condition columns
  (Spider 2.0-lite) takes an answer with more columns: some of them must match the gold's.
* Rows form a multiset: duplicates count, so a missing or extra DISTINCT is wrong. Unordered
  rows are paired by a bipartite matching, so tolerance never depends on the order rows come in.
* When the gold SQL has a top-level ORDER BY, rows must come in the gold order, even rows tied
  on the sort key (the checker does not know the key).
* Columns may be permuted, as in Spider's execution accuracy: the answer is right if one order
  of its columns makes the rows match. Matching each column separately is not enough: values
  scrambled across rows are wrong. Only column orders in which every column matches its gold
  column as a multiset are tried, identity first, at most 1,000 of them, found in at most
  50,000 search steps; equal gold columns are interchangeable, so their orders count as one.
"""

import bisect
import itertools
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

_MAX_COLUMN_ORDERS = 1_000
_MAX_ORDER_SEARCH_STEPS = 50_000
_MAX_ROUNDED_DECIMALS = 15
_NOISE_RELATIVE = 1e-12
_NOISE_ABSOLUTE = 1e-9
# These patterns read agent text. Every quantifier is possessive (it never gives back what it
# took), so no pattern can backtrack and each runs in time linear in its input.
_ANSWER_PREFIX = re.compile(r"\**+\s*+(?:final\s++)?answer\s*+\**+\s*+:\s*+\**+\s*+", re.IGNORECASE)
# A fence's language tag starts with a letter: a first line of digits is a value.
_FENCE_LANGUAGE = re.compile(r"(?:[A-Za-z][\w+-]*+)?")
_NUMBER_TEXT = re.compile(
    r"[+-]?+(?:[1-9]\d{0,2}+(?:,\d{3})++|0|[1-9]\d*+)(?:\.\d++)?+(?:[eE][+-]?+\d++)?+"
)
_DIGIT_COMMA_DIGIT = re.compile(r"\d,\d")
_THOUSANDS_HEAD = re.compile(r"[+-]?+[1-9]\d{0,2}+")
_THOUSANDS_GROUP = re.compile(r"\d{3}")
_THOUSANDS_TAIL = re.compile(r"\d{3}(?:\.\d++)?+\s*+")


@dataclass(frozen=True)
class GoldAnswer:
    columns: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]
    ordered: bool
    # The answer may hold more columns; only the gold's are checked (Spider 2.0's condition
    # columns).
    subset: bool = False

    def __post_init__(self) -> None:
        if not self.columns or not self.rows:
            raise ValueError("a gold answer needs at least one column and one row")
        if any(len(row) != len(self.columns) for row in self.rows):
            raise ValueError("every gold row needs one cell per column")
        cells = [cell for row in self.rows for cell in row]
        if any(cell is not None and not isinstance(cell, int | float | str) for cell in cells):
            raise ValueError("gold cells must be int, float, str or None")
        if all(cell is None for cell in cells):
            raise ValueError("a gold answer cannot be entirely NULL")

    @property
    def kind(self) -> str:
        if len(self.columns) > 1:
            return "table"
        return "scalar" if len(self.rows) == 1 else "list"


@dataclass(frozen=True)
class Verdict:
    correct: bool
    reason: str


@dataclass(frozen=True)
class _Number:
    value: Decimal
    decimals: int  # digits after the decimal point, as written
    exact: bool  # written as an integer: a gold cell like this admits no tolerance


_Cell = _Number | str | None


class _Rejected(Exception):
    """The answer cannot be read; the message becomes the verdict's reason."""


def gold_as_json(gold: GoldAnswer) -> str:
    if gold.kind == "scalar":
        payload: object = gold.rows[0][0]
    elif gold.kind == "list":
        payload = [row[0] for row in gold.rows]
    else:
        payload = [list(row) for row in gold.rows]
    return json.dumps(payload, ensure_ascii=False)


class AnswerChecker:
    def __init__(self, max_chars: int = 100_000):
        if max_chars < 1:
            raise ValueError("max_chars must be >= 1")
        self.max_chars = max_chars

    def check(self, gold: GoldAnswer, value: object) -> Verdict:
        # The answer's shape is judged before its cells are read, so the work done on a long
        # answer of the wrong shape does not grow with its number of items.
        try:
            rows, read_cell = self._read_rows(gold, value)
            if not any(rows):
                return Verdict(False, "empty answer")
            if any(not _fits_columns(len(row), gold) for row in rows):
                return Verdict(False, "column count differs")
            if len(rows) != len(gold.rows):
                return Verdict(False, "row count differs")
            answer = [tuple(map(read_cell, row)) for row in rows]
        except _Rejected as rejected:
            return Verdict(False, str(rejected))
        return self._compare(gold, answer)

    def rows(self, gold: GoldAnswer, value: object) -> list[tuple[object, ...]] | None:
        """The answer's rows read as `check` reads them, each cell as written (a number, text
        that is a plain number included, as Decimal; other text stripped; NULL as None), for
        metrics that compare otherwise; None when the answer cannot be read."""
        try:
            rows, read_cell = self._read_rows(gold, value)
            item = _plain_item if read_cell is _text_cell else _as_given
            return [tuple(plain_value(item(raw)) for raw in row) for row in rows]
        except _Rejected:
            return None

    def _read_rows(
        self, gold: GoldAnswer, value: object
    ) -> tuple[list[list[Any]], Callable[[Any], _Cell]]:
        """The answer's rows of raw items, and how to read one item as a cell."""
        if isinstance(value, str):
            self._check_size(value)
            text = _strip_answer_prefix(_strip_code_fence(_strip_answer_prefix(value.strip())))
            try:
                parsed = json.loads(text, parse_float=_json_number)
            except (ValueError, RecursionError):
                return (_rows_from_text(text, gold) if text else []), _text_cell
            return _rows_from_json(parsed, gold), _cell
        try:
            text = json.dumps(value, default=_decimal_as_text)
        except (TypeError, ValueError, RecursionError):
            raise _Rejected("unsupported answer value") from None
        self._check_size(text)
        return _rows_from_json(json.loads(text, parse_float=_json_number), gold), _cell

    def _check_size(self, text: str) -> None:
        if len(text) > self.max_chars:
            raise _Rejected(f"answer too long (over {self.max_chars} characters)")

    def _compare(self, gold: GoldAnswer, answer: list[tuple[_Cell, ...]]) -> Verdict:
        expected = [tuple(map(_cell, row)) for row in gold.rows]
        inexact_columns = {
            index
            for row in expected
            for index, cell in enumerate(row)
            if isinstance(cell, _Number) and not cell.exact
        }
        order_differs = False
        orders = self._column_orders(expected, answer, inexact_columns)
        for order in itertools.islice(orders, _MAX_COLUMN_ORDERS):
            reordered = [tuple(row[index] for index in order) for row in answer]
            if self._rows_match(expected, reordered, inexact_columns, gold.ordered):
                return Verdict(True, "matched")
            if gold.ordered and self._rows_match(expected, reordered, inexact_columns, False):
                order_differs = True
        return Verdict(False, "row order differs" if order_differs else "values differ")

    def _column_orders(
        self,
        expected: list[tuple[_Cell, ...]],
        answer: list[tuple[_Cell, ...]],
        inexact_columns: set[int],
    ) -> Iterator[tuple[int, ...]]:
        """Orders of the answer's columns (answer index per gold column), identity first, in
        which every column matches its gold column as a multiset."""
        answer_columns = [[(cell,) for cell in column] for column in zip(*answer, strict=True)]
        by_multiset: defaultdict[frozenset, list[int]] = defaultdict(list)
        for j, column in enumerate(answer_columns):
            by_multiset[_multiset(column)].append(j)
        options = []
        for index, column in enumerate(zip(*expected, strict=True)):
            gold_column = [(cell,) for cell in column]
            if index in inexact_columns:
                fitting = [
                    j
                    for j, candidate in enumerate(answer_columns)
                    if self._rows_match(gold_column, candidate, {0}, ordered=False)
                ]
            else:
                fitting = by_multiset.get(_multiset(gold_column), [])
            if index in fitting:  # the identity order comes first
                at = fitting.index(index)
                fitting = [index, *fitting[:at], *fitting[at + 1 :]]
            options.append(fitting)
        if not _has_perfect_matching(options, len(answer_columns)):
            return iter(())
        return _distinct_choices(options, _previous_equal(list(zip(*expected, strict=True))))

    def _rows_match(
        self,
        expected: list[tuple[_Cell, ...]],
        answer: list[tuple[_Cell, ...]],
        inexact_columns: set[int],
        ordered: bool,
    ) -> bool:
        if ordered:
            return all(map(self._row_matches, expected, answer))
        if Counter(map(_row_key, expected)) == Counter(map(_row_key, answer)):
            return True
        if not inexact_columns:
            return False
        # Exact columns must agree key for key, so they split the rows into groups; inside a
        # group, the numbers of one tolerant column narrow the search to a window of values.
        exact_columns = [i for i in range(len(expected[0])) if i not in inexact_columns]
        pivot = min(inexact_columns)

        def exact_part(row: tuple[_Cell, ...]) -> tuple[object, ...]:
            return tuple(_key(row[i]) for i in exact_columns)

        groups: defaultdict[tuple[object, ...], list[int]] = defaultdict(list)
        for index, row in enumerate(answer):
            groups[exact_part(row)].append(index)
        lookups = {
            part: _RowsByNumber(indexes, [answer[index][pivot] for index in indexes])
            for part, indexes in groups.items()
        }
        candidates = []
        for row in expected:
            lookup = lookups.get(exact_part(row))
            nearby = lookup.near(row[pivot], self._reach) if lookup else []
            candidates.append([index for index in nearby if self._row_matches(row, answer[index])])
        return _has_perfect_matching(candidates, len(answer))

    @staticmethod
    def _reach(gold: float) -> float:
        """How far from a gold number a matching answer can be: float noise, or half a unit in
        the second decimal for a rounded answer, plus slack for float conversion."""
        return max(_float_noise(gold), 0.005) + 1e-9 * (1 + abs(gold))

    def _row_matches(self, expected: tuple[_Cell, ...], answer: tuple[_Cell, ...]) -> bool:
        return all(map(self._cells_match, expected, answer))

    def _cells_match(self, expected: _Cell, answer: _Cell) -> bool:
        if not (isinstance(expected, _Number) and isinstance(answer, _Number)):
            return expected == answer
        if expected.value == answer.value:
            return True
        if expected.exact or not (expected.value.is_finite() and answer.value.is_finite()):
            return False
        gold, given = float(expected.value), float(answer.value)
        within = abs(given - gold) <= _float_noise(gold)
        return (within and math.isfinite(gold)) or _is_rounding_of(answer, expected.value)


def _float_noise(gold: float) -> float:
    """How far a REAL result can drift with the order of float arithmetic: twelve
    significant digits, never a unit of a number below 10**12."""
    return max(_NOISE_RELATIVE * abs(gold), _NOISE_ABSOLUTE)


def _is_rounding_of(answer: _Number, gold: Decimal) -> bool:
    if not 2 <= answer.decimals <= _MAX_ROUNDED_DECIMALS or answer.value == 0:
        return False
    quantum = Decimal(1).scaleb(-answer.decimals)
    try:
        return any(
            gold.quantize(quantum, rounding=mode) == answer.value
            for mode in (ROUND_HALF_EVEN, ROUND_HALF_UP)
        )
    except InvalidOperation:  # more digits than the decimal context holds
        return False


def _strip_answer_prefix(text: str) -> str:
    prefix = _ANSWER_PREFIX.match(text)
    return text[prefix.end() :].strip() if prefix else text


def _strip_code_fence(text: str) -> str:
    """The inside of a fenced block (```` ```lang ... ``` ````), or the text as it is."""
    if len(text) < 6 or not (text.startswith("```") and text.endswith("```")):
        return text
    inside = text[3:-3]
    language, newline, body = inside.partition("\n")
    if newline and _FENCE_LANGUAGE.fullmatch(language):
        inside = body
    return inside.strip()


def _json_number(text: str) -> Decimal | str:
    """A JSON number with the decimals it was written with; as text if Decimal cannot hold it
    (an exponent in the quintillions), which then compares as a string."""
    try:
        return Decimal(text)
    except InvalidOperation:
        return text


def _decimal_as_text(value: object) -> str:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"unsupported type {type(value).__name__}")


def _rows_from_json(value: object, gold: GoldAnswer) -> list[list[object]]:
    while isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))
    if isinstance(value, dict):
        return [list(value.values())]
    if not isinstance(value, list):
        return [[value]]
    nested = [isinstance(item, list | dict) for item in value]
    if all(nested):
        return [list(item.values()) if isinstance(item, dict) else item for item in value]
    if any(nested):
        raise _Rejected("mixed flat and nested items")
    if gold.kind == "table" and len(gold.rows) == 1:
        return [value]
    return [[item] for item in value]


def _rows_from_text(text: str, gold: GoldAnswer) -> list[list[object]]:
    """Rows of raw text items; `_text_cell` reads each."""
    if gold.kind == "scalar":
        return [[text]]
    lines = _content_lines(text)
    if gold.kind == "list":
        items = lines if len(lines) > 1 else [i for line in lines for i in _split_cells(line)]
        return [[item] for item in items[: len(gold.rows) + 1]]  # enough to tell the count
    rows = []
    for line in lines:
        rows.append(_split_cells(line))
        if not _fits_columns(len(rows[-1]), gold):
            break  # this row decides the verdict (column count differs): skip the rest
    return rows


def _fits_columns(count: int, gold: GoldAnswer) -> bool:
    return count >= len(gold.columns) if gold.subset else count == len(gold.columns)


def _content_lines(text: str) -> list[str]:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) >= 2 and _is_table_rule(lines[1]):
        lines = lines[2:]  # a Markdown table: header, then the --- rule
    content = []
    for line in lines:
        if line[0] in "-*•" and line[1:2].isspace():
            line = line[1:].lstrip()
        if len(line) >= 2 and line[0] == line[-1] == "|":
            line = line[1:-1]
        content.append(line)
    return content


def _is_table_rule(line: str) -> bool:
    return "---" in line and set(line) <= set("|-: ")


def _split_cells(line: str) -> list[str]:
    for separator in ("|", "\t", ";"):
        if separator in line:
            return line.split(separator)
    if not _DIGIT_COMMA_DIGIT.search(line):
        return line.split(",")
    items: list[list[str]] = []  # each item as its comma-separated pieces
    continues = False  # the last item is digit groups that a ",ddd" piece would continue
    for piece in line.split(","):
        if continues and _THOUSANDS_TAIL.fullmatch(piece):
            items[-1].append(piece)
            continues = bool(_THOUSANDS_GROUP.fullmatch(piece))
        else:
            items.append([piece])
            continues = piece != "" and bool(_THOUSANDS_HEAD.fullmatch(piece.lstrip()))
    return [",".join(pieces) for pieces in items]


def _text_cell(item: str) -> _Cell:
    return _cell(_plain_item(item))


def _plain_item(item: str) -> object:
    item = item.strip()
    if item.casefold() in ("null", "none"):
        return None
    if len(item) >= 2 and item[0] == item[-1] and item[0] in "'\"`":
        return item[1:-1]
    return item


def _cell(raw: object) -> _Cell:
    if raw is None:
        return None
    if isinstance(raw, int):
        return _Number(Decimal(raw), 0, exact=True)
    if isinstance(raw, float):
        return _decimal_number(Decimal(repr(raw)), exact=False)
    if isinstance(raw, Decimal):
        return _decimal_number(raw, exact=False)
    if isinstance(raw, str):
        text = raw.strip()
        if _NUMBER_TEXT.fullmatch(text):
            number = _json_number(text.replace(",", ""))
            if isinstance(number, Decimal):
                return _decimal_number(number, exact=not any(mark in text for mark in ".eE"))
        return " ".join(text.split()).casefold()
    raise _Rejected("cells must be plain values, not nested lists or objects")


def plain_value(raw: object) -> object:
    """A cell as written: a number (or text that is a plain number) as Decimal, other text
    stripped, NULL as None."""
    cell = _cell(raw)
    if isinstance(cell, _Number):
        return cell.value
    return raw.strip() if isinstance(raw, str) else cell


def _as_given(raw: object) -> object:
    return raw


def _decimal_number(value: Decimal, exact: bool) -> _Number:
    exponent = value.as_tuple().exponent
    decimals = -exponent if isinstance(exponent, int) and exponent < 0 else 0
    return _Number(value, decimals, exact)


def _key(cell: _Cell) -> object:
    """Equal keys mean the cells match exactly (Decimal hashes agree for equal values)."""
    return cell.value if isinstance(cell, _Number) else cell


def _row_key(row: tuple[_Cell, ...]) -> tuple[object, ...]:
    return tuple(map(_key, row))


def _multiset(column: list[tuple[_Cell]]) -> frozenset:
    return frozenset(Counter(map(_row_key, column)).items())


def _previous_equal(columns: list[tuple[_Cell, ...]]) -> list[int | None]:
    """For each column, the index of the last earlier column holding the same cells."""
    last_seen: dict[tuple[_Cell, ...], int] = {}
    previous = []
    for index, column in enumerate(columns):
        previous.append(last_seen.get(column))
        last_seen[column] = index
    return previous


def _distinct_choices(
    options: list[list[int]], previous_equal: list[int | None]
) -> Iterator[tuple[int, ...]]:
    """Tuples taking one option per position, all different, depth first in option order.

    Equal gold columns are interchangeable, so a column equal to an earlier one only takes a
    higher answer index than that one did. The search stops after a bounded number of steps:
    with tolerant columns, pairs that fit one by one can leave many dead ends.
    """
    chosen: list[int] = []
    taken: set[int] = set()
    pending = [iter(options[0])]  # per position, the options not tried yet
    steps = 0
    while pending and steps < _MAX_ORDER_SEARCH_STEPS:
        twin = previous_equal[len(chosen)]
        above = -1 if twin is None else chosen[twin]
        for choice in pending[-1]:
            steps += 1
            if choice > above and choice not in taken:
                break
        else:
            pending.pop()
            if chosen:
                taken.discard(chosen.pop())
            continue
        if len(chosen) + 1 == len(options):
            yield (*chosen, choice)
            continue
        chosen.append(choice)
        taken.add(choice)
        pending.append(iter(options[len(chosen)]))


class _RowsByNumber:
    """Answer row indexes, searchable by the finite number each holds in one column."""

    def __init__(self, indexes: list[int], cells: list[_Cell]) -> None:
        self.indexes = indexes
        located = sorted(
            (number, index)
            for index, cell in zip(indexes, cells, strict=True)
            if (number := _finite_float(cell)) is not None
        )
        self.numbers = [number for number, _ in located]
        self.located = [index for _, index in located]

    def near(self, cell: _Cell, reach: Callable[[float], float]) -> list[int]:
        """Rows whose number could match a gold cell; every row if that cell is no number."""
        number = _finite_float(cell)
        if number is None:
            return self.indexes
        low = bisect.bisect_left(self.numbers, number - reach(number))
        high = bisect.bisect_right(self.numbers, number + reach(number))
        return self.located[low:high]


def _finite_float(cell: _Cell) -> float | None:
    if not isinstance(cell, _Number):
        return None
    number = float(cell.value)
    return number if math.isfinite(number) else None


def _has_perfect_matching(candidates: list[list[int]], answer_count: int) -> bool:
    """Kuhn's augmenting paths: can every gold row take a distinct candidate answer row?"""
    owner = [-1] * answer_count  # answer row -> gold row it is paired with
    return all(_augment(root, candidates, owner) for root in range(len(candidates)))


def _augment(root: int, candidates: list[list[int]], owner: list[int]) -> bool:
    seen: set[int] = set()
    stack = [(root, iter(candidates[root]))]
    path: list[int] = []  # path[k]: the answer row taken by the gold row at stack[k]
    while stack:
        _, options = stack[-1]
        for answer_row in options:
            if answer_row in seen:
                continue
            seen.add(answer_row)
            path.append(answer_row)
            if owner[answer_row] == -1:
                for (taker, _), taken in zip(stack, path, strict=True):
                    owner[taken] = taker
                return True
            stack.append((owner[answer_row], iter(candidates[owner[answer_row]])))
            break
        else:
            stack.pop()
            if path:
                path.pop()
    return False
