"""The oracle: a policy that knows the gold SQL. It explores the tables the gold reads, runs
the gold through the query tool (page by page, by the row limit in force, when it has more
rows) and answers with the rows it saw. It uses every tool the way an agent would, so `sqlenv
play`, the tests, the SFT transcripts and the evaluation harness can play whole episodes
without a model.
"""

from __future__ import annotations

import json
from typing import Any

from env_core.calls import Play, ToolCall, drive
from env_core.catalog import Question
from env_core.episode import Episode, ToolResult
from env_core.sql_analysis import referenced_tables


def oracle_calls(question: Question, budget: int, max_rows: int) -> Play:
    """Explore while the budget allows, keeping steps for the gold query and the answer, whose
    rows it reads `max_rows` (the most a query shows) at a time. A gold given as a result (no
    SQL) is answered as it is."""
    if not question.sql:
        yield ToolCall("answer", {"value": json.dumps([list(row) for row in question.gold.rows])})
        return
    pages_needed = -(-len(question.gold.rows) // max_rows)
    spare = budget - pages_needed - 1
    for table in referenced_tables(question.sql)[: max(0, spare)]:
        yield ToolCall("describe", {"table": table})
    rows: list[list[Any]] = []
    for page in range(pages_needed):
        sql = question.sql.strip().rstrip(";")
        if pages_needed > 1:
            sql = f"SELECT * FROM ({sql}) LIMIT {max_rows} OFFSET {page * max_rows}"
        result = yield ToolCall("query", {"sql": sql})
        rows.extend(result.data.get("rows", []))
    yield ToolCall("answer", {"value": json.dumps(rows)})


def play_oracle(episode: Episode) -> list[ToolResult]:
    """Play an episode to its end with the oracle; returns each step's result."""
    calls = oracle_calls(episode.question, episode.budget_left, episode.executor.limits.max_rows)
    made = drive(calls, lambda call: episode.call(call.tool, call.arguments), episode.budget_left)
    return [result for _, result in made]
