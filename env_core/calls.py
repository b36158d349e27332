"""A policy's play of an episode as a generator of tool calls, and the one loop that drives it.

A play yields a `ToolCall`, receives the call's `ToolResult` through `send`, and returns when
it stops (normally after `answer`). The oracle (`env_core.oracle`) and every policy of the
evaluation harness play this way.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from env_core.episode import ToolResult


@dataclass(frozen=True)
class ToolCall:
    tool: str
    arguments: dict[str, Any]


Play = Generator[ToolCall, ToolResult, None]


def drive(
    play: Play, step: Callable[[ToolCall], ToolResult], max_calls: int
) -> list[tuple[ToolCall, ToolResult]]:
    """Make the play's calls with `step`, sending each result back, until it stops, a result
    ends the episode or `max_calls` calls are made (a play that repeats calls an episode
    does not take would otherwise never stop); returns the calls with their results."""
    made: list[tuple[ToolCall, ToolResult]] = []
    try:
        call = next(play)
        while len(made) < max_calls:
            result = step(call)
            made.append((call, result))
            if result.done:
                break
            call = play.send(result)
    except StopIteration:
        pass
    finally:
        play.close()
    return made
