"""The bounds every executor call runs within: time, rows, and the sizes of statements, values
and results."""

from __future__ import annotations

from dataclasses import dataclass

from env_core.render import MAX_TEXT_CHARS
from env_core.settings import Settings


@dataclass(frozen=True)
class ExecutorLimits:
    timeout_s: float = Settings.query_timeout_s
    max_rows: int = Settings.max_rows
    max_sample_rows: int = Settings.max_rows
    max_sql_chars: int = 8_000
    max_cell_chars: int = 500
    max_result_chars: int = MAX_TEXT_CHARS
    # A single SQL function call cannot be interrupted, and the cost of some (instr, replace,
    # LIKE) grows with the product of their arguments' sizes: small values keep one call short.
    max_value_bytes: int = 20_000
    max_like_pattern_bytes: int = 100

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.max_rows < 1 or self.max_sql_chars < 1:
            raise ValueError("timeout_s, max_rows and max_sql_chars must be positive")
