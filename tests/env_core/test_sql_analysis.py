import json
from pathlib import Path
from typing import Any

import pytest

from env_core.sql_analysis import order_matters, referenced_tables, spider_hardness

WHERE_OPS = ("not", "between", "=", ">", "<", ">=", "<=", "!=", "in", "like", "is", "exists")
LIKE_OP = WHERE_OPS.index("like")
SET_OPERATIONS = ("intersect", "union", "except")


def reference_hardness(sql: dict[str, Any]) -> str:
    """Spider's eval_hardness, computed over the official parse in the dev file."""
    on, where, having = sql["from"]["conds"], sql["where"], sql["having"]
    conditions = on[::2] + where[::2] + having[::2]
    components = (
        bool(where)
        + bool(sql["groupBy"])
        + bool(sql["orderBy"])
        + (sql["limit"] is not None)
        + max(len(sql["from"]["table_units"]) - 1, 0)
        + (on[1::2] + where[1::2] + having[1::2]).count("or")
        + sum(condition[1] == LIKE_OP for condition in conditions)
    )
    nested = sum(isinstance(value, dict) for condition in conditions for value in condition[3:])
    nested += sum(sql[operation] is not None for operation in SET_OPERATIONS)

    def aggregate_units(units: list[Any]) -> int:
        # Spider's count_agg tests unit[0] != 0. For a condition unit that is the NOT flag, and
        # the "and"/"or" strings in HAVING count as well; the reference keeps that behaviour.
        return sum(unit[0] != 0 for unit in units)

    order_columns = []
    if sql["orderBy"]:
        order_columns = [col for val_unit in sql["orderBy"][1] for col in val_unit[1:] if col]
    aggregates = (
        aggregate_units(sql["select"][1])
        + aggregate_units(where[::2])
        + aggregate_units(sql["groupBy"])
        + aggregate_units(order_columns)
        + aggregate_units(having)
    )
    others = (
        (aggregates > 1)
        + (len(sql["select"][1]) > 1)
        + (len(where) > 1)
        + (len(sql["groupBy"]) > 1)
    )
    if components <= 1 and others == 0 and nested == 0:
        return "easy"
    if (others <= 2 and components <= 1 and nested == 0) or (
        components <= 2 and others < 2 and nested == 0
    ):
        return "medium"
    if (
        (others > 2 and components <= 2 and nested == 0)
        or (2 < components <= 3 and others <= 2 and nested == 0)
        or (components <= 1 and others == 0 and nested <= 1)
    ):
        return "hard"
    return "extra"


def test_spider_hardness_agrees_with_official_rules_on_every_dev_record(spider_dir: Path) -> None:
    records = json.loads((spider_dir / "dev_without_wta_1.json").read_text(encoding="utf-8"))
    assert len(records) == 972
    disagreements = {}
    for index, record in enumerate(records):
        ours, official = spider_hardness(record["query"]), reference_hardness(record["sql"])
        if ours != official:
            disagreements[index] = f"{ours} != {official}: {record['query']}"
    assert disagreements == {}


@pytest.mark.parametrize(
    ("sql", "level"),
    [
        ("SELECT count(*) FROM singer", "easy"),
        ("SELECT name FROM singer WHERE age > 20 ORDER BY name", "medium"),
        ("SELECT name, age FROM singer ORDER BY age DESC LIMIT 3", "medium"),
        ("SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer)", "hard"),
        ("SELECT name FROM singer WHERE EXISTS (SELECT 1 FROM song)", "hard"),
        ("SELECT name FROM singer UNION SELECT name FROM band", "hard"),
        ("SELECT a FROM t WHERE b LIKE '%x%' OR c = 1 GROUP BY a ORDER BY a", "extra"),
        # NOT IN: Spider counts the NOT flag as an aggregate, pushing this from hard to extra.
        ("SELECT avg(age) FROM student WHERE id NOT IN (SELECT id FROM pet)", "extra"),
    ],
)
def test_spider_hardness_examples(sql: str, level: str) -> None:
    assert spider_hardness(sql) == level


def test_spider_hardness_ignores_subqueries_used_as_tables() -> None:
    assert spider_hardness("SELECT count(*) FROM (SELECT a FROM t INTERSECT SELECT a FROM u)") == (
        "easy"
    )


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT name FROM singer ORDER BY age", True),
        ("select name from singer order by age desc limit 1", True),
        ("SELECT name FROM singer", False),
        ("SELECT name FROM (SELECT name FROM singer ORDER BY age LIMIT 3)", False),
        ("SELECT name FROM singer WHERE age IN (SELECT age FROM t ORDER BY age LIMIT 1)", False),
        ("WITH young AS (SELECT * FROM singer ORDER BY age LIMIT 5) SELECT name FROM young", False),
        ("SELECT a FROM t UNION SELECT a FROM u ORDER BY a", True),
        ("SELECT a FROM t EXCEPT SELECT a FROM u", False),
    ],
)
def test_order_matters_only_for_a_top_level_order_by(sql: str, expected: bool) -> None:
    assert order_matters(sql) is expected


@pytest.mark.parametrize(
    ("sql", "tables"),
    [
        ("SELECT * FROM singer", ["singer"]),
        (
            "SELECT T1.name FROM Singer AS T1 JOIN concert AS T2 ON T1.id = T2.singer_id "
            "JOIN singer AS T3 ON T3.id = T2.id",
            ["Singer", "concert"],
        ),
        (
            "WITH recent AS (SELECT * FROM concert WHERE year > 2014) "
            "SELECT s.name FROM recent JOIN stadium AS s ON s.id = recent.stadium_id",
            ["concert", "stadium"],
        ),
        (
            "SELECT sub.n FROM (SELECT count(*) AS n FROM singer) AS sub "
            "WHERE sub.n > (SELECT count(*) FROM band)",
            ["singer", "band"],
        ),
        ("SELECT a FROM t INTERSECT SELECT a FROM u EXCEPT SELECT a FROM t", ["t", "u"]),
        ('SELECT "x"."y" FROM "Weird Table" AS x', ["Weird Table"]),
        ("SELECT j.value FROM singer, json_each(singer.tags) AS j", ["singer"]),
        ("SELECT 1", []),
    ],
)
def test_referenced_tables(sql: str, tables: list[str]) -> None:
    assert referenced_tables(sql) == tables


@pytest.mark.parametrize("function", [order_matters, referenced_tables, spider_hardness])
@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELEC name FROM singer", "could not be parsed"),
        ("SELECT name FROM singer WHERE", "could not be parsed"),
        ("SELECT 'unterminated FROM singer", "could not be parsed"),
        ("", "found 0"),
        ("SELECT 1; SELECT 2", "found 2"),
        ("DELETE FROM singer", "found DELETE"),
    ],
)
def test_bad_sql_raises_value_error(function, sql: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        function(sql)
