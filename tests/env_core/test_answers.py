import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from env_core.answers import AnswerChecker, GoldAnswer, Verdict, gold_as_json

CHECKER = AnswerChecker()


def scalar(value: object) -> GoldAnswer:
    return GoldAnswer(("value",), ((value,),), ordered=False)


def single_column(*values: object, ordered: bool = False) -> GoldAnswer:
    return GoldAnswer(("value",), tuple((value,) for value in values), ordered)


def table(*rows: tuple[object, ...], ordered: bool = False) -> GoldAnswer:
    columns = tuple(f"c{index}" for index in range(len(rows[0])))
    return GoldAnswer(columns, tuple(rows), ordered)


def is_correct(gold: GoldAnswer, value: object, checker: AnswerChecker = CHECKER) -> bool:
    verdict = checker.check(gold, value)
    assert isinstance(verdict, Verdict)
    return verdict.correct


# --- GoldAnswer -----------------------------------------------------------------------------


def test_kind_is_scalar_list_or_table() -> None:
    assert scalar(1).kind == "scalar"
    assert single_column(1, 2).kind == "list"
    assert table((1, "a")).kind == "table"
    assert table((1, "a"), (2, "b")).kind == "table"


@pytest.mark.parametrize(
    ("columns", "rows"),
    [
        (("a",), ()),
        (("a",), ((None,),)),
        (("a", "b"), ((None, None), (None, None))),
        ((), ((),)),
        (("a", "b"), ((1,),)),
        (("a",), ((b"blob",),)),
    ],
    ids=["no rows", "null scalar", "all null table", "no columns", "ragged row", "bytes cell"],
)
def test_degenerate_gold_is_refused(columns: tuple[str, ...], rows: tuple) -> None:
    with pytest.raises(ValueError):
        GoldAnswer(columns, rows, ordered=False)


def test_gold_as_json_renders_each_kind() -> None:
    assert gold_as_json(scalar(42)) == "42"
    assert gold_as_json(single_column("a", None)) == '["a", null]'
    assert gold_as_json(table(("x", 1.5), ("é", 2))) == '[["x", 1.5], ["é", 2]]'


# --- Accepted wrappings ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        42,
        42.0,
        "42",
        " 42 \n",
        "'42'",
        '"42"',
        "[42]",
        "[[42]]",
        [42],
        [[42]],
        (42,),
        {"answer": 42},
        '{"answer": 42}',
        '{"result": {"count": 42}}',
        [{"count(*)": 42}],
        '[{"count": 42}]',
    ],
)
def test_scalar_gold_accepts_wrappings(value: object) -> None:
    assert is_correct(scalar(42), value)


@pytest.mark.parametrize(
    "value",
    [
        ["a", "b"],
        [["a"], ["b"]],
        '["a", "b"]',
        '[["a"], ["b"]]',
        '{"names": ["a", "b"]}',
        [{"name": "a"}, {"name": "b"}],
        "a, b",
        "a; b",
        "a\nb",
        "a\n\n  b  \n",
        "- a\n- b",
        "* 'a'\n* \"b\"",
        "'a', 'b'",
        "| name |\n|------|\n| a |\n| b |",
    ],
)
def test_list_gold_accepts_wrappings(value: object) -> None:
    assert is_correct(single_column("a", "b"), value)


@pytest.mark.parametrize(
    "value",
    [
        ["Alice", 30],
        '["Alice", 30]',
        [["Alice", 30]],
        {"name": "Alice", "age": 30},
        '[{"name": "Alice", "age": 30}]',
        "Alice, 30",
        "Alice | 30",
        "Alice\t30",
        "| name | age |\n| --- | ---: |\n| Alice | 30 |",
    ],
)
def test_single_row_table_gold_accepts_wrappings(value: object) -> None:
    assert is_correct(table(("Alice", 30)), value)


@pytest.mark.parametrize(
    "value",
    [
        [["x", 1], ["y", 2]],
        [{"name": "x", "n": 1}, {"name": "y", "n": 2}],
        "x, 1\ny, 2",
        "x | 1\ny | 2",
        "x\t1\ny\t2",
        "| name | n |\n|---|---|\n| x | 1 |\n| y | 2 |",
        "- x, 1\n- y, 2",
    ],
)
def test_table_gold_accepts_wrappings(value: object) -> None:
    assert is_correct(table(("x", 1), ("y", 2)), value)


def test_multi_row_table_gold_refuses_a_flat_list() -> None:
    verdict = CHECKER.check(table(("x", 1), ("y", 2)), ["x", 1, "y", 2])
    assert verdict == Verdict(False, "column count differs")


@pytest.mark.parametrize(
    "value",
    [
        "```json\n[1, 2]\n```",
        "```\n1\n2\n```",
        "```[1, 2]```",
        "Answer: [1, 2]",
        "answer:1, 2",
        "final ANSWER: 1; 2",
        "**Final answer:** [1, 2]",
        "**Answer**: 1, 2",
        "Answer:\n```json\n[1, 2]\n```",
        "```\nAnswer: 1\n2\n```",
    ],
)
def test_code_fences_and_answer_prefixes_are_stripped(value: str) -> None:
    assert is_correct(single_column(1, 2), value)


def test_a_fenced_first_line_that_is_no_language_tag_is_a_value() -> None:
    """A first line of digits was dropped as the fence's language tag: an extra item passed."""
    assert not is_correct(single_column(2, 3), "```1\n2\n3\n```")
    assert is_correct(single_column(1, 2, 3), "```1\n2\n3\n```")
    assert is_correct(single_column(2, 3), "```c++\n2\n3\n```")


def test_prose_around_the_value_is_wrong() -> None:
    assert not is_correct(scalar(42), "The answer is 42.")


# --- Numbers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gold", "value"),
    [
        (scalar(1234567), "1,234,567"),
        (scalar(1234567), '"1,234,567"'),
        (scalar(1234567), "Answer: 1,234,567"),
        (scalar(-1234.5), "-1,234.5"),
        (scalar("1,234"), 1234),
        (single_column(1234, 5678), "1,234, 5,678"),
        (single_column(1234, 5678), "1,234; 5,678"),
        (single_column(1234, 5678), '["1,234", "5,678"]'),
        (single_column(10, 20), "10,20"),
        (table(("x", 1234567)), "x, 1,234,567"),
    ],
)
def test_thousands_separators(gold: GoldAnswer, value: object) -> None:
    assert is_correct(gold, value)


@pytest.mark.parametrize("value", ["1,23", "12,34,567", "1234,567"])
def test_malformed_thousands_groups_are_not_numbers(value: str) -> None:
    assert not is_correct(scalar(1234567), value)


def test_numeric_text_and_numbers_are_interchangeable() -> None:
    assert is_correct(scalar("1990"), 1990)
    assert is_correct(scalar(1990), "1990")
    assert is_correct(scalar(" 3.5 "), 3.5)
    assert is_correct(scalar(5), 5.0)
    assert is_correct(scalar(5), "5.000")


def test_integer_gold_admits_no_tolerance() -> None:
    assert not is_correct(scalar(5), 5.0001)
    assert not is_correct(scalar(123456789), 123456789.5)
    assert not is_correct(scalar(1990), "1990.01")


def test_leading_zeros_percent_and_units_stay_text() -> None:
    assert not is_correct(scalar("007"), 7)
    assert is_correct(scalar("007"), "007")
    assert not is_correct(scalar(45), "45%")
    assert not is_correct(scalar(3), "$3")


def test_booleans_count_as_integers() -> None:
    assert is_correct(scalar(1), True)
    assert is_correct(scalar(1), "true")
    assert is_correct(scalar(0), "false")
    assert not is_correct(scalar("true"), "true")


@pytest.mark.parametrize(
    ("gold", "value"),
    [
        (78.783333, "78.78"),
        (78.783333, 78.78),
        (78.783333, "78.7833"),
        (0.1234, "0.12"),
        (0.125, "0.13"),  # half up
        (0.125, "0.12"),  # half even
        (2 / 3, "0.67"),
        (-2 / 3, "-0.667"),
        (1234.5678, "1,234.57"),
    ],
)
def test_answers_rounded_to_two_or_more_decimals_match(gold: float, value: object) -> None:
    assert is_correct(scalar(gold), value)


@pytest.mark.parametrize(
    ("gold", "value"),
    [
        (78.783333, "78.8"),  # one decimal is too coarse
        (78.783333, "79"),
        (0.1234, "0.1"),
        (0.1234, "0.13"),
        (0.126, "0.12"),
        (0.004, "0.00"),  # rounding to zero says nothing
        (1.004, 0.995),  # both round to 1.00: canonical rounding would accept this
    ],
)
def test_coarse_or_misrounded_answers_are_wrong(gold: float, value: object) -> None:
    assert not is_correct(scalar(gold), value)


@pytest.mark.parametrize(
    ("gold", "value"),
    [
        (19500.0, 19501),  # a relative tolerance of 1e-4 accepted this
        (19500.0, "19501"),
        (19500.0, "19499.5"),
        (1000.0, "1000.05"),
        (123456.789, "123456.8"),  # one decimal is too coarse, however large the number
    ],
)
def test_a_large_real_gold_is_not_matched_by_a_near_miss(gold: float, value: object) -> None:
    assert not is_correct(scalar(gold), value)


@pytest.mark.parametrize(
    ("gold", "value"),
    [
        (19500.0, 19500),
        (4.0, "4"),
        (0.1 + 0.2, "0.3"),  # rounded to one decimal, but equal within float noise
        (1234567.891, 1234567.8910000001),
        (1234567.891, "1234567.89"),
    ],
)
def test_float_noise_and_rounding_still_match(gold: float, value: object) -> None:
    assert is_correct(scalar(gold), value)


def test_absolute_tolerance_near_zero() -> None:
    assert is_correct(scalar(0.0), "1e-10")
    assert not is_correct(scalar(0.0), "1e-8")
    assert is_correct(scalar(0.0), 0)


def test_infinity_and_nan() -> None:
    assert is_correct(scalar(float("inf")), "Infinity")
    assert not is_correct(scalar(float("inf")), 1e308)
    assert not is_correct(scalar(1.0), "NaN")
    assert is_correct(scalar("1e400"), "1E+400")
    assert not is_correct(scalar("1e400"), 0)
    assert not is_correct(scalar("1e400"), "1e401")


# --- Strings and NULL ------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["new york", "  NEW   york ", '"New\tYork"', ["new york"]])
def test_strings_ignore_case_and_whitespace(value: object) -> None:
    assert is_correct(scalar("New York"), value)


def test_different_strings_are_wrong() -> None:
    assert not is_correct(scalar("New York"), "New Yorks")
    assert not is_correct(scalar("New York"), "NewYork")


@pytest.mark.parametrize("value", ["[1, null]", [1, None], "1\nNULL", "1, null", "1; None"])
def test_null_matches_null(value: object) -> None:
    assert is_correct(single_column(1, None), value)


@pytest.mark.parametrize(
    "value", ["[1, 0]", [1, 0], '[1, ""]', [1, ""], '[1, "null"]', "1\n'NULL'", "1\n0"]
)
def test_null_is_not_zero_empty_or_the_word_null(value: object) -> None:
    assert not is_correct(single_column(1, None), value)


def test_null_answer_to_a_value_is_wrong() -> None:
    assert not is_correct(scalar(0), None)
    assert not is_correct(scalar(0), "NULL")
    assert not is_correct(scalar(""), "null")


# --- Known false positives of other checkers ------------------------------------------------


def test_dropped_duplicate_is_wrong() -> None:
    assert not is_correct(single_column("a", "a", "b"), ["a", "b"])


def test_added_duplicate_is_wrong() -> None:
    assert not is_correct(single_column("a", "a", "b"), ["a", "b", "b"])
    assert not is_correct(single_column("a", "b"), ["a", "a", "b"])


def test_distinct_mistake_is_wrong_in_tables() -> None:
    gold = table(("x", 1), ("x", 1), ("y", 2))
    assert not is_correct(gold, [["x", 1], ["y", 2]])
    assert not is_correct(gold, [["x", 1], ["y", 2], ["y", 2]])
    assert is_correct(gold, [["y", 2], ["x", 1], ["x", 1]])


def test_duplicates_count_even_when_distinct_rows_and_columns_agree() -> None:
    gold = table(("a", 1), ("a", 1), ("b", 2), ("b", 2), ("a", 2), ("b", 1))
    answer = [["a", 2], ["a", 2], ["b", 1], ["b", 1], ["a", 1], ["b", 2]]
    assert {tuple(row) for row in answer} == set(gold.rows)
    assert not is_correct(gold, answer)


@pytest.mark.parametrize("gold", [scalar(42), single_column("a", "b"), table(("x", 1))])
@pytest.mark.parametrize(
    "value", ["", "   ", [], "[]", {}, "{}", [[]], "[[]]", "```\n```", "Answer:"]
)
def test_empty_answer_is_wrong_for_any_gold(gold: GoldAnswer, value: object) -> None:
    verdict = CHECKER.check(gold, value)
    assert verdict == Verdict(False, "empty answer")


def test_row_scrambled_table_is_wrong_although_columns_match_one_by_one() -> None:
    gold = table(("alice", 1, "paris"), ("bob", 2, "rome"))
    assert not is_correct(gold, [["alice", 2, "paris"], ["bob", 1, "rome"]])
    assert not is_correct(gold, [["alice", 1, "rome"], ["bob", 2, "paris"]])


def test_row_scrambled_table_with_tolerant_cells_is_wrong() -> None:
    gold = table(("a", 1.504), ("b", 2.496))
    assert not is_correct(gold, [["a", "2.50"], ["b", "1.50"]])
    assert is_correct(gold, [["b", "2.50"], ["a", "1.50"]])


def test_integer_gold_is_not_matched_under_tolerance_whatever_the_order() -> None:
    gold = single_column(9, 10, 100)
    assert is_correct(gold, ["100", "9", "10"])
    assert is_correct(gold, "100\n10\n9")
    assert not is_correct(gold, [100, 10, 9.0009])
    assert not is_correct(gold, [9, 10, 10])
    assert not is_correct(gold, ["9", "10", "1000"])


def test_right_answer_that_string_sorted_pairing_would_reject() -> None:
    # As strings, gold sorts 20.0 before 9.996 while the answer sorts 10.00 before 20.0.
    assert is_correct(single_column(9.996, 20.0), [20.0, "10.00"])
    assert not is_correct(single_column(9.996, 20.0), [20.0, "10.01"])


def test_matching_finds_pairs_that_greedy_exact_first_pairing_misses() -> None:
    gold = single_column(1.0, 1.004, 2.0)
    # Pairing 1.0 with the equal 1.00 first leaves 1.0 for 1.004, which it does not round.
    assert not is_correct(scalar(1.004), "1.0")
    assert is_correct(gold, ["1.00", "1.0", "2.0"])
    assert is_correct(gold, ["2.0", "1.0", "1.00"])
    assert not is_correct(gold, ["1.0", "1.0", "2.0"])


def test_matching_finds_pairs_that_first_fit_pairing_misses() -> None:
    # 1.00 fits 1.0 and 0.996; 1.0 fits only 1.0, so 0.996 must take 1.00.
    assert not is_correct(scalar(0.996), "1.0")
    assert is_correct(single_column(1.0, 0.996, 2.0), ["1.00", "1.0", "2.0"])
    assert is_correct(single_column(1.0, 0.996, 2.0), ["1.0", "2.0", "1.00"])


def test_table_matching_uses_exact_columns_and_tolerant_cells_together() -> None:
    gold = table(("a", 1.0), ("a", 1.004), ("b", 7))
    assert is_correct(gold, [["a", "1.00"], ["a", "1.0"], ["b", 7]])
    assert not is_correct(gold, [["a", "1.0"], ["b", "1.00"], ["a", 7]])


def test_large_tolerant_multiset_is_matched_in_any_order() -> None:
    values = [index / 7 for index in range(1, 400)]
    gold = single_column(*values)
    answer = [round(value, 6) for value in reversed(values)]
    assert is_correct(gold, answer)
    answer[0] += 0.5
    assert not is_correct(gold, answer)


def test_rounded_answers_are_matched_inside_unordered_lists() -> None:
    gold = single_column(78.783333, 0.1234, 12.3456, 0.1234)
    assert is_correct(gold, "0.12\n12.35\n0.12\n78.78")
    assert not is_correct(gold, "0.12\n12.35\n0.13\n78.78")


# --- Order, columns, counts -----------------------------------------------------------------


def test_ordered_gold_rejects_swapped_rows() -> None:
    gold = single_column("a", "b", "c", ordered=True)
    assert is_correct(gold, ["a", "b", "c"])
    assert CHECKER.check(gold, ["b", "a", "c"]) == Verdict(False, "row order differs")


def test_unordered_gold_accepts_swapped_rows() -> None:
    assert is_correct(single_column("a", "b", "c"), ["c", "a", "b"])


def test_ordered_table_rejects_swapped_rows_but_accepts_permuted_columns() -> None:
    gold = table(("a", 1), ("b", 2), ordered=True)
    assert is_correct(gold, [[1, "a"], [2, "b"]])
    assert not is_correct(gold, [[2, "b"], [1, "a"]])


def test_column_permutation_is_correct() -> None:
    gold = table(("alice", 30, 1.5), ("bob", 40, 2.5))
    assert is_correct(gold, [[1.5, "alice", 30], [2.5, "bob", 40]])
    assert is_correct(gold, "30 | 1.5 | alice\n40 | 2.5 | bob")


def test_column_permutation_among_look_alike_columns() -> None:
    gold = table((1, 2, 3), (4, 5, 6), (7, 8, 9))
    assert is_correct(gold, [[3, 1, 2], [6, 4, 5], [9, 7, 8]])
    assert not is_correct(gold, [[3, 1, 2], [6, 4, 5], [8, 7, 9]])


@pytest.mark.parametrize(
    "value",
    [[["x", 1, "extra"], ["y", 2, "extra"]], [["x"], ["y"]], [["x", 1], ["y"]], "x\ny"],
)
def test_wrong_column_count_is_wrong(value: object) -> None:
    assert CHECKER.check(table(("x", 1), ("y", 2)), value) == Verdict(False, "column count differs")


def test_wrong_row_count_is_wrong() -> None:
    gold = table(("x", 1), ("y", 2))
    assert CHECKER.check(gold, [["x", 1]]) == Verdict(False, "row count differs")
    assert CHECKER.check(scalar(42), [42, 42]) == Verdict(False, "row count differs")


# --- Hostile input ---------------------------------------------------------------------------


def test_oversize_input_is_wrong() -> None:
    small = AnswerChecker(max_chars=10)
    verdict = small.check(single_column(1, 2, 3, 4, 5), "[1, 2, 3, 4, 5]")
    assert not verdict.correct
    assert "too long" in verdict.reason
    assert "too long" in small.check(single_column(1, 2, 3, 4, 5), [1, 2, 3, 4, 5]).reason
    assert "too long" in CHECKER.check(scalar(42), "42" + " " * 100_000).reason


@pytest.mark.parametrize(
    "value",
    [
        "[[[",
        "{",
        '{"a": ',
        "\x00\x01\x02",
        "[1, [2, [3]]]",
        '{"a": {"b": [1, [2]]}}',
        "[1, [2]]",
        "[" * 50_000,
        "[" * 40_000 + "]" * 40_000,
        object(),
        {1, 2},
        b"42",
        10**5000,
        float("nan"),
        [[42, [1]]],
        [{"a": {"b": 42}, "c": 1}],
    ],
    ids=lambda value: type(value).__name__,
)
def test_garbage_input_is_wrong_without_raising(value: object) -> None:
    for gold in (scalar(42), single_column(1, 42), table(("x", 42))):
        assert not is_correct(gold, value)


def test_reason_never_reveals_gold_values() -> None:
    gold = table(("Secret Name", 987654), ("Other", 123456), ordered=True)
    answers = ["x", [], [["Other", 123456], ["Secret Name", 987654]], [["a", 1]], "[[["]
    for answer in answers:
        reason = CHECKER.check(gold, answer).reason.casefold()
        assert "secret" not in reason and "987654" not in reason and "123456" not in reason


def test_checker_refuses_a_size_limit_below_one() -> None:
    with pytest.raises(ValueError):
        AnswerChecker(max_chars=0)


# --- Properties ------------------------------------------------------------------------------

ANY_CELL = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
SMALL_CELL = st.one_of(
    st.none(),
    st.integers(min_value=-(10**9), max_value=10**9),
    st.floats(min_value=-1e9, max_value=1e9, allow_nan=False),
    st.text(max_size=10),
)


@st.composite
def gold_answers(draw: st.DrawFn, ordered: bool | None = None) -> GoldAnswer:
    width = draw(st.integers(1, 4))
    row = st.tuples(*[ANY_CELL] * width)
    rows = draw(st.lists(row, min_size=1, max_size=6).filter(has_a_value))
    is_ordered = draw(st.booleans()) if ordered is None else ordered
    return GoldAnswer(tuple(f"c{index}" for index in range(width)), tuple(rows), is_ordered)


def has_a_value(rows: list[tuple[object, ...]]) -> bool:
    return any(cell is not None for row in rows for cell in row)


@settings(deadline=None)
@given(gold_answers())
def test_gold_as_json_is_always_correct(gold: GoldAnswer) -> None:
    assert CHECKER.check(gold, gold_as_json(gold)) == Verdict(True, "matched")


@settings(deadline=None)
@given(gold_answers(ordered=False), st.randoms(use_true_random=False))
def test_unordered_gold_accepts_any_row_and_column_shuffle(
    gold: GoldAnswer, rng: random.Random
) -> None:
    rows = [list(row) for row in gold.rows]
    rng.shuffle(rows)
    order = list(range(len(gold.columns)))
    rng.shuffle(order)
    answer = [[row[index] for index in order] for row in rows]
    assert is_correct(gold, json.dumps(answer))


@settings(deadline=None)
@given(st.data())
def test_row_permutation_is_correct_iff_unordered_or_unchanged(data: st.DataObject) -> None:
    # A first column of distinct, unmistakable ids makes every real permutation visible.
    width = data.draw(st.integers(0, 3))
    cells = data.draw(st.lists(st.tuples(*[SMALL_CELL] * width), min_size=2, max_size=6))
    rows = tuple((10**15 + 1 + index, *row) for index, row in enumerate(cells))
    ordered = data.draw(st.booleans())
    gold = GoldAnswer(tuple(f"c{index}" for index in range(width + 1)), rows, ordered)
    permutation = data.draw(st.permutations(range(len(rows))))
    answer = json.dumps([list(rows[index]) for index in permutation])
    unchanged = list(permutation) == sorted(permutation)
    assert is_correct(gold, answer) == (not ordered or unchanged)


JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children)
    ),
    max_leaves=12,
)
ANSWER_TEXT = st.text(alphabet=st.sampled_from("0123456789.,;|\t\n -+eE'\"`[]{}:*#aN"), max_size=40)
SOME_GOLDS = [
    scalar(42),
    scalar(0.5),
    single_column(1.5, None, "x"),
    table(("x", 1.25), ("y", 2)),
    table(("x", 1.25), ordered=True),
]


@settings(deadline=None)
@given(st.one_of(JSON_LIKE, ANSWER_TEXT, st.text(max_size=40)))
def test_check_never_raises(value: object) -> None:
    for gold in SOME_GOLDS:
        assert isinstance(CHECKER.check(gold, value).correct, bool)
