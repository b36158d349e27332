"""Two server processes and a client that spreads episodes across them.

An episode lives in one process's session manager, so every call of an episode must reach the
process that started it: the client keeps that affinity by episode id (behind a load balancer
the same is done by the MCP session id header or by the WebSocket connection). Calls routed to
the other process get a clear "no open episode" error instead of a wrong answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import httpx
import pytest

from env_core.episode import EpisodeStart, ToolResult
from evals.doors import Door, open_door
from evals.evaluate import evaluate
from evals.policies import OraclePolicy

EPISODES = 24


class SpreadingClient:
    """A door over several doors: new episodes go round-robin, calls follow their episode."""

    def __init__(self, doors: list[Door]) -> None:
        self.doors = doors
        self.catalog = doors[0].catalog
        self.home: dict[str, Door] = {}
        self.started: Counter[int] = Counter()

    def start(self, question_id: str) -> EpisodeStart:
        index = sum(self.started.values()) % len(self.doors)
        self.started[index] += 1
        start = self.doors[index].start(question_id)
        self.home[start.episode_id] = self.doors[index]
        return start

    def step(self, episode_id: str, tool: str, arguments: Mapping[str, Any]) -> ToolResult:
        return self.home[episode_id].step(episode_id, tool, arguments)

    def end(self, episode_id: str) -> None:
        self.home.pop(episode_id).end(episode_id)

    def worker_spec(self):
        return self.doors[0].worker_spec()


@pytest.mark.parametrize(("kind", "counters"), [("mcp-http", "/healthz"), ("openenv", "/stats")])
def test_episodes_spread_over_two_processes(dev_door_spec, kind, counters):
    doors = [open_door(replace(dev_door_spec, kind=kind)) for _ in range(2)]
    try:
        client = SpreadingClient(doors)
        result = evaluate(client, OraclePolicy(), EPISODES, seed=0)
        assert sum(record.correct for record in result.records) == EPISODES
        assert client.started == {0: EPISODES // 2, 1: EPISODES // 2}
        created = []
        for door in doors:
            stats = httpx.get(f"{door.worker_spec().url}{counters}", timeout=5).json()
            created.append(stats.get("episodes", stats)["created"])
        assert created == [EPISODES // 2, EPISODES // 2]
    finally:
        for door in doors:
            door.close()


def test_a_call_routed_to_the_wrong_process_is_a_clear_error(dev_door_spec):
    doors = [open_door(replace(dev_door_spec, kind="mcp-http")) for _ in range(2)]
    try:
        question = doors[0].catalog.questions(dev_door_spec.split)[0]
        start = doors[0].start(question.id)
        misrouted = doors[1].step(start.episode_id, "query", {"sql": "SELECT 1"})
        assert not misrouted.ok and misrouted.data["error"] == "unknown_episode"
        assert f"no open episode {start.episode_id!r}" in misrouted.text
        assert doors[0].step(start.episode_id, "query", {"sql": "SELECT 1"}).ok
    finally:
        for door in doors:
            door.close()
