"""How an LLM policy samples: shared by both backends and the dev server."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GenerationSettings:
    temperature: float = 0.0  # 0 means greedy decoding
    max_new_tokens: int = 512
