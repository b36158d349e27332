"""Each dataset's official metric, where it differs in kind from the environment's verdict,
computed from what an episode records: the answer given and the question's gold.

The official metrics compare the result of the predicted SQL; here the answer is that result.
Its rows are read as the checker reads them, each cell as written (`AnswerChecker.rows`).

* BIRD's execution accuracy: the answer's rows and the gold's, as sets, are equal: duplicates
  and order never count, columns must come in the gold's order, values must be equal (a
  number written as text equals that number; no rounding, no case folding).
* Spider 2.0-lite's: against any acceptable gold, each of the gold's condition columns is
  matched by some column of the answer on its own: the same values, sorted unless order
  matters, numbers within 0.01, NULL matching NULL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal

from env_core.answers import AnswerChecker, GoldAnswer, plain_value
from env_core.catalog import Question

Rows = Sequence[tuple[object, ...]]
SPIDER2_TOLERANCE = Decimal("0.01")


def _bird_execution_accuracy(gold: GoldAnswer, answer: Rows) -> bool:
    expected = {tuple(plain_value(cell) for cell in row) for row in gold.rows}
    return set(answer) == expected


def _spider2_condition_columns(gold: GoldAnswer, answer: Rows) -> bool:
    given = list(zip(*answer, strict=False))
    expected = list(zip(*gold.rows, strict=True))
    return bool(answer) and all(
        any(
            _same_values([plain_value(c) for c in column], list(other), gold.ordered)
            for other in given
        )
        for column in expected
    )


def _same_values(expected: list[object], given: list[object], ordered: bool) -> bool:
    if len(expected) != len(given):
        return False
    if not ordered:
        expected, given = sorted(expected, key=_sort_key), sorted(given, key=_sort_key)
    return all(_close(e, g) for e, g in zip(expected, given, strict=True))


def _sort_key(value: object) -> tuple[bool, str]:
    return value is None, str(value)


def _close(expected: object, given: object) -> bool:
    if isinstance(expected, Decimal) and isinstance(given, Decimal):
        return abs(expected - given) <= SPIDER2_TOLERANCE
    return expected == given


# By dataset: the metric's name in reports and how it judges an answer's rows against a gold.
METRICS: dict[str, tuple[str, Callable[[GoldAnswer, Rows], bool]]] = {
    "bird": ("BIRD EX", _bird_execution_accuracy),
    "spider2-lite": ("Spider 2.0 EX", _spider2_condition_columns),
}


def official_verdict(question: Question, answer: object) -> bool | None:
    """Whether the dataset's official metric accepts `answer` (None: no answer was given), or
    None where the dataset has no metric of another kind than the verdict's."""
    if question.dataset not in METRICS:
        return None
    if answer is None:
        return False
    _, accepts = METRICS[question.dataset]
    checker = AnswerChecker()
    for gold in question.golds:
        rows = checker.rows(gold, answer)
        if rows is not None and accepts(gold, rows):
            return True
    return False
