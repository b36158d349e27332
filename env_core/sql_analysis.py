"""Facts read from SQL text with sqlglot: result ordering, base tables and Spider hardness."""

import functools

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError

DIALECT = "sqlite"


def order_matters(sql: str) -> bool:
    """True when the top-level query (a compound one included) ends with ORDER BY."""
    return _parse_query(sql).args.get("order") is not None


def referenced_tables(sql: str) -> list[str]:
    """Base tables the query reads anywhere, in order of first appearance, without CTE names.

    Names are compared case-insensitively, as SQLite does, and kept as first spelled.
    Table-valued functions such as json_each(...) are not tables and are left out.
    """
    query = _parse_query(sql)
    cte_names = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    tables = [
        table for table in query.find_all(exp.Table) if isinstance(table.this, exp.Identifier)
    ]
    tables.sort(key=lambda table: table.this.meta.get("start", 0))
    names: dict[str, str] = {}
    for table in tables:
        key = table.name.lower()
        if key not in cte_names:
            names.setdefault(key, table.name)
    return list(names.values())


def spider_hardness(sql: str) -> str:
    """The Spider difficulty level ("easy", "medium", "hard" or "extra") of a query.

    Mirrors `eval_hardness` in Spider's evaluation.py. Only the first SELECT is scored: Spider's
    parser hangs a set operation off the first SELECT and a trailing ORDER BY or LIMIT off the
    last one, and the scoring does not look inside nested queries.
    """
    query = _parse_query(sql)
    select = _first_select(query)
    join_conditions = [join.args.get("on") for join in select.args.get("joins") or []]
    where = _clause_condition(select, "where")
    having = _clause_condition(select, "having")
    conditions = [*join_conditions, where, having]
    predicates = [p for condition in conditions for p in _predicates(condition)]

    components = (
        sum(bool(select.args.get(clause)) for clause in ("where", "group", "order", "limit"))
        + len(select.args.get("joins") or [])
        + sum(_connector_count(condition, exp.Or) for condition in conditions)
        + sum(isinstance(_without_not(p), exp.Like) for p in predicates)
    )
    is_set_operation = isinstance(query, exp.SetOperation)
    nested_queries = sum(_subquery_values(p) for p in predicates) + is_set_operation
    group_by = select.args.get("group")
    order_by = select.args.get("order")
    # Spider's count_agg reads the first field of each unit as an aggregate id. For WHERE and
    # HAVING conditions that field is the NOT flag, and HAVING's "and"/"or" tokens count too.
    aggregates = (
        sum(_aggregate_count(item) for item in select.expressions)
        + _negated_count(where)
        + (_aggregate_count(group_by) if group_by else 0)
        + (_aggregate_count(order_by) if order_by else 0)
        + _negated_count(having)
        + _connector_count(having, exp.Connector)
    )
    others = (
        (aggregates > 1)
        + (len(select.expressions) > 1)
        + (len(_predicates(where)) > 1)
        + (group_by is not None and len(group_by.expressions) > 1)
    )
    return _hardness_level(components, nested_queries, others)


def _hardness_level(components: int, nested_queries: int, others: int) -> str:
    if components <= 1 and others == 0 and nested_queries == 0:
        return "easy"
    if nested_queries == 0 and (
        (others <= 2 and components <= 1) or (components <= 2 and others < 2)
    ):
        return "medium"
    if (
        (nested_queries == 0 and others > 2 and components <= 2)
        or (nested_queries == 0 and 2 < components <= 3 and others <= 2)
        or (components <= 1 and others == 0 and nested_queries <= 1)
    ):
        return "hard"
    return "extra"


# A gold's order and hardness are read from one parse; the trees are only read, never changed.
@functools.lru_cache(maxsize=16)
def _parse_query(sql: str) -> exp.Query:
    try:
        statements = [s for s in sqlglot.parse(sql, dialect=DIALECT) if s is not None]
    except SqlglotError as error:
        raise ValueError(f"SQL could not be parsed: {_describe(error)}") from error
    if len(statements) != 1:
        raise ValueError(f"expected exactly one SQL statement, found {len(statements)}")
    statement = statements[0]
    if not isinstance(statement, exp.Query):
        raise ValueError(f"expected a query (SELECT ...), found {statement.key.upper()}")
    return statement


def _describe(error: SqlglotError) -> str:
    if isinstance(error, ParseError) and error.errors:
        detail = error.errors[0]
        return f"{detail['description']} (line {detail['line']}, column {detail['col']})"
    return str(error)


def _first_select(query: exp.Query) -> exp.Select:
    node: exp.Expression = query
    while isinstance(node, exp.SetOperation | exp.Subquery):
        node = node.this
    if not isinstance(node, exp.Select):
        raise ValueError(f"expected a SELECT query, found {node.key.upper()}")
    return node


def _clause_condition(select: exp.Select, clause: str) -> exp.Expression | None:
    wrapper = select.args.get(clause)
    return wrapper.this if wrapper else None


def _predicates(condition: exp.Expression | None) -> list[exp.Expression]:
    """The conditions joined by AND/OR, flattened through parentheses as Spider lists them."""
    if condition is None:
        return []
    if isinstance(condition, exp.Paren):
        return _predicates(condition.this)
    if isinstance(condition, exp.Connector):
        return _predicates(condition.left) + _predicates(condition.right)
    return [condition]


def _connector_count(condition: exp.Expression | None, kind: type[exp.Connector]) -> int:
    if isinstance(condition, exp.Paren):
        return _connector_count(condition.this, kind)
    if isinstance(condition, exp.Connector):
        return (
            isinstance(condition, kind)
            + _connector_count(condition.left, kind)
            + _connector_count(condition.right, kind)
        )
    return 0


def _without_not(predicate: exp.Expression) -> exp.Expression:
    return predicate.this if isinstance(predicate, exp.Not) else predicate


def _negated_count(condition: exp.Expression | None) -> int:
    return sum(isinstance(p, exp.Not) for p in _predicates(condition))


def _subquery_values(predicate: exp.Expression) -> int:
    """Nested queries a predicate compares against (its left-hand side is not a value)."""
    predicate = _without_not(predicate)
    if isinstance(predicate, exp.Exists):
        return 1
    return sum(
        isinstance(value, exp.Subquery) for key, value in predicate.args.items() if key != "this"
    )


def _aggregate_count(node: exp.Expression) -> int:
    """Aggregate calls in an expression, not counting those inside nested queries."""
    return sum(
        isinstance(inner, exp.AggFunc)
        for inner in node.walk(prune=lambda inner: isinstance(inner, exp.Query | exp.Subquery))
    )
