"""A scripted player that knows the gold SQL: it explores the tables the gold reads, runs the
gold through the query tool and answers with what it saw. It exercises every tool the way an
agent would, so `sqlenv play` and the tests can drive whole episodes without a model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from env_core.catalog import Question
from env_core.episode import Episode, ToolResult
from env_core.sql_analysis import referenced_tables

PAGE_ROWS = 20


def scripted_calls(question: Question, budget: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """Explore while the budget allows, keeping steps for the gold query and the answer.

    The caller sends each result back with `.send(result)`; the gold query's rows become the
    answer, fetched page by page when the query tool truncates them.
    """
    pages_needed = -(-len(question.gold.rows) // PAGE_ROWS)
    spare = budget - pages_needed - 1
    for table in referenced_tables(question.sql)[: max(0, spare)]:
        yield "describe", {"table": table}
    rows: list[list[Any]] = []
    for page in range(pages_needed):
        sql = question.sql.strip().rstrip(";")
        if pages_needed > 1:
            sql = f"SELECT * FROM ({sql}) LIMIT {PAGE_ROWS} OFFSET {page * PAGE_ROWS}"
        result: ToolResult = yield "query", {"sql": sql}
        rows.extend(result.data.get("rows", []))
    yield "answer", {"value": json.dumps(rows)}


def play_scripted(episode: Episode) -> list[ToolResult]:
    """Drive an episode to its end with the scripted calls; returns each step's result."""
    calls = scripted_calls(episode.question, episode.budget_left)
    results: list[ToolResult] = []
    call = next(calls)
    while not episode.done:
        results.append(episode.call(*call))
        try:
            call = calls.send(results[-1])
        except StopIteration:
            break
    return results
