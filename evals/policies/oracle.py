"""The oracle: the engine's scripted player, which explores the tables the gold SQL reads, runs
the gold SQL (page by page when the result is truncated) and answers with its rows."""

from __future__ import annotations

from env_core.scripted import scripted_calls
from evals.policy import EpisodeContext, Play, ToolCall


class OraclePolicy:
    name = "oracle"

    def play(self, context: EpisodeContext) -> Play:
        calls = scripted_calls(context.question, context.start.budget)
        tool, arguments = next(calls)
        while True:
            result = yield ToolCall(tool, arguments)
            try:
                tool, arguments = calls.send(result)
            except StopIteration:
                return
