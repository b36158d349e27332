"""The oracle as an evaluation policy: the engine's play that knows the gold SQL
(`env_core.oracle`)."""

from __future__ import annotations

from env_core.oracle import oracle_calls
from evals.policy import EpisodeContext, Play


class OraclePolicy:
    name = "oracle"

    def play(self, context: EpisodeContext) -> Play:
        if context.question is None:
            raise ValueError("the oracle plays only questions whose gold it can look up")
        return (yield from oracle_calls(context.question, context.start.budget, context.max_rows))
