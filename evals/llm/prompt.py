"""What an LLM policy is told beyond the agent contract (`env_core.contract`): the nudge after
a turn without a usable tool call."""

from __future__ import annotations

NO_TOOL_CALL = (
    "Your reply did not contain a valid tool call. Reply with exactly one call to describe, "
    "sample, query or answer, with its arguments as a JSON object."
)
