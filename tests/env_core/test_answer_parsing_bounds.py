"""Answers of any shape are judged with work linear in their length.

The work is counted, not timed: the Python lines the checker executes (a count that does not
depend on how busy the machine is), and the shape of every pattern it runs on agent text (no
unbounded repeat that can give back what it took, so no pattern backtracks). A backtracking
pattern or a quadratic loop shows in these counts whatever the machine; the time a 20,000-
character answer takes is measured by `benchmarks/attack_bounds.py`.
"""

import json
import re
import re._constants as sre
import re._parser as sre_parse
import sys
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from env_core import answers, render
from env_core.answers import AnswerChecker, GoldAnswer
from env_core.episode import MAX_ANSWER_CHARS

CHECKER = AnswerChecker()
GOLDS = {
    "scalar": GoldAnswer(("v",), ((42,),), ordered=False),
    "list": GoldAnswer(("v",), ((1,), (2.5,)), ordered=False),
    "ordered": GoldAnswer(("v",), (("a",), (1234.5,)), ordered=True),
    "table": GoldAnswer(("a", "b"), (("x", 1), ("y", 2.25)), ordered=False),
}
# Lines executed per character of answer, at most: the costliest shape below takes about 17.
LINES_PER_CHAR = 25

# Each unit is repeated (after a fixed head, before a fixed tail) up to the length tested:
# every prefix, fence, bullet, separator, thousands, quote and number pattern the reader knows.
SHAPES = {
    "answer prefix, spaces": ("answer", " ", "x"),
    "answer prefix, spaces then star": ("Answer  ", " *", "x"),
    "final answer prefix, spaces": ("final", " ", "answer x"),
    "bold prefix": ("", "**", "answer: 1"),
    "stars and spaces": ("", "* ", ""),
    "answer prefix, stars and colons": ("answer", "*:", "x"),
    "unclosed fence": ("```", "a", ""),
    "unclosed fence, lines": ("```", "json\n", ""),
    "fences only": ("", "```", ""),
    "fence with a long language tag": ("```", "a-", "\n1```"),
    "bullets": ("", "- ", ""),
    "bullet lines": ("", "* a\n", ""),
    "table rule": ("| a |\n", "|-: ", "\n| 1 |"),
    "pipes": ("", "|", ""),
    "tabs": ("", "\t", ""),
    "semicolons": ("", ";", ""),
    "commas": ("", ",", ""),
    "newlines": ("1", "\n", "2"),
    "thousands groups": ("1", ",234", ""),
    "thousands groups, then not": ("1", ",234", "x"),
    "thousands groups with spaces": ("1", ",234 ", ""),
    "thousands groups, empty pieces": ("1,234", ",", "5"),
    "digits": ("", "7", ""),
    "digits with a fraction": ("1.", "1", "x"),
    "exponent digits": ("1e", "9", ""),
    "quotes": ("", "'", ""),
    "quoted items": ("", "'a', ", ""),
    "nested brackets": ("", "[", ""),
    "closed nested brackets": ("", "[1,", "]"),
    "nulls": ("", "null, ", "1"),
    "whitespace runs": ("a", " \t", "b"),
    "table of cells": ("", "x, 1\n", ""),
}


def answer_of(shape: tuple[str, str, str], length: int) -> str:
    head, unit, tail = shape
    body = length - len(head) - len(tail)
    return head + (unit * (body // len(unit) + 1))[:body] + tail


def lines_run(check, *args) -> int:
    """How many Python lines `check(*args)` executes."""
    count = 0

    def trace(_frame, event, _arg):
        nonlocal count
        count += event == "line"
        return trace

    sys.settrace(trace)
    try:
        check(*args)
    finally:
        sys.settrace(None)
    return count


def work(value: object, checker: AnswerChecker = CHECKER) -> int:
    """Lines executed judging `value` against every gold."""
    return sum(lines_run(checker.check, gold, value) for gold in GOLDS.values())


def assert_linear(shape: tuple[str, str, str], length: int = MAX_ANSWER_CHARS) -> None:
    head, unit, tail = shape
    # Whole units only, so the longer answer is the shorter one's units twice over: cut
    # mid-unit, the same shape may read differently (one more cell, a number left whole).
    units = (length - len(head) - len(tail)) // len(unit)
    single, double = (work(head + unit * n + tail) for n in (units, 2 * units))
    # Twice the length may take twice the work (plus a constant); a quadratic reader takes 4x.
    assert double <= 2.1 * single + 500, (single, double)
    assert single <= LINES_PER_CHAR * length, single


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_every_shape_takes_work_linear_in_its_length(shape) -> None:
    assert len(answer_of(shape, MAX_ANSWER_CHARS)) == MAX_ANSWER_CHARS
    assert_linear(shape)


@pytest.mark.parametrize(
    "shape", [SHAPES["answer prefix, spaces"], SHAPES["thousands groups"], SHAPES["commas"]]
)
def test_the_checkers_own_size_limit_takes_linear_work_too(shape) -> None:
    assert_linear(shape, CHECKER.max_chars // 2)


@pytest.mark.parametrize("as_text", [True, False], ids=["json text", "list"])
def test_a_long_list_takes_work_linear_in_its_items(as_text: bool) -> None:
    def answer(items: int) -> object:
        return json.dumps(list(range(items))) if as_text else list(range(items))

    single, double = work(answer(3_000)), work(answer(6_000))
    assert double <= 2.1 * single + 500, (single, double)


SPECIAL = "0123456789,.;|\t\n -+eE'\"`[]{}:*#•aAnswerFinal"


@settings(deadline=None, max_examples=60)
@given(st.text(alphabet=st.sampled_from(SPECIAL), min_size=1, max_size=12))
def test_any_repeated_pattern_over_the_special_characters_takes_linear_work(unit: str) -> None:
    assert_linear(("", unit, ""), MAX_ANSWER_CHARS // 4)


@settings(deadline=None, max_examples=30)
@given(
    st.text(alphabet=st.sampled_from(SPECIAL), max_size=8),
    st.text(alphabet=st.sampled_from(SPECIAL), min_size=1, max_size=4),
    st.text(alphabet=st.sampled_from(SPECIAL), max_size=8),
)
def test_any_padded_pattern_takes_linear_work(head: str, unit: str, tail: str) -> None:
    assert_linear((head, unit, tail), MAX_ANSWER_CHARS // 4)


def _repeats(items) -> Iterator[tuple[object, int, int]]:
    """Every repeat in a parsed pattern: (kind, min, max), nested ones included."""
    for op, value in items:
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            low, high, inner = value
            yield op, low, high
            yield from _repeats(inner)
        elif op is sre.SUBPATTERN:
            yield from _repeats(value[-1])
        elif op is sre.ATOMIC_GROUP:
            yield from _repeats(value)
        elif op is sre.BRANCH:
            for branch in value[1]:
                yield from _repeats(branch)


AGENT_TEXT_PATTERNS = {
    f"{module.__name__}.{name}": pattern
    for module in (answers, render)
    for name, pattern in vars(module).items()
    if isinstance(pattern, re.Pattern)
}


@pytest.mark.parametrize("pattern", AGENT_TEXT_PATTERNS.values(), ids=AGENT_TEXT_PATTERNS.keys())
def test_no_pattern_that_reads_agent_text_can_backtrack(pattern: re.Pattern) -> None:
    # An unbounded repeat that gives back what it took is what makes a pattern take
    # exponential or quadratic time; possessive repeats never give anything back.
    parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    greedy = [
        (low, high)
        for op, low, high in _repeats(parsed)
        if op is not sre.POSSESSIVE_REPEAT and high == sre.MAXREPEAT
    ]
    assert not greedy, f"{pattern.pattern}: unbounded repeats that backtrack {greedy}"
    assert "(?P=" not in pattern.pattern and not re.search(r"\\[1-9]", pattern.pattern)


def wide_gold(width: int, *rows: int) -> GoldAnswer:
    return GoldAnswer(
        tuple(f"c{i}" for i in range(width)), tuple((r,) * width for r in rows), False
    )


def test_a_gold_of_many_equal_columns_takes_little_work_whatever_the_answer() -> None:
    # Every gold column fits the same answer columns: trying column orders used to explore
    # every arrangement of them (12! for twelve columns) before saying no.
    gold = wide_gold(12, 1)
    assert not CHECKER.check(gold, ", ".join(["1"] * 11 + ["9"])).correct
    assert CHECKER.check(gold, ", ".join(["1"] * 12)).correct
    two_rows = wide_gold(24, 1, 2)
    swapped = [[1 + j % 2 for j in range(24)], [2 - j % 2 for j in range(24)]]
    assert not CHECKER.check(two_rows, swapped).correct
    assert CHECKER.check(two_rows, [[1] * 24, [2] * 24]).correct
    assert lines_run(CHECKER.check, gold, ", ".join(["1"] * 11 + ["9"])) < 5_000
    # The search for a column order is capped: a few lines per step at most.
    assert lines_run(CHECKER.check, two_rows, swapped) < 5 * answers._MAX_ORDER_SEARCH_STEPS


def test_equal_gold_columns_still_accept_a_column_permutation() -> None:
    gold = GoldAnswer(("a", "b", "c"), (("x", "x", 1), ("y", "y", 2)), ordered=True)
    assert CHECKER.check(gold, [[1, "x", "x"], [2, "y", "y"]]).correct
    assert not CHECKER.check(gold, [[1, "x", "y"], [2, "y", "x"]]).correct


@pytest.mark.parametrize(
    "value",
    ["1e1000000000000000000000", "[1e1000000000000000000000]", '"-5E+99999999999999999999"'],
)
def test_numbers_beyond_decimal_range_are_strings_not_crashes(value: str) -> None:
    for gold in GOLDS.values():
        assert not CHECKER.check(gold, value).correct
    assert CHECKER.check(GoldAnswer(("v",), ((value.strip('[]"'),),), False), value).correct
