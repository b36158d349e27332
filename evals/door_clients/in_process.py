"""The in-process door: the engine's episode manager, called directly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from env_core.episode import EpisodeStart, ToolResult
from env_core.factory import open_manager
from evals.door_clients.spec import DoorSpec


class InProcessClient:
    def __init__(self, spec: DoorSpec) -> None:
        self.spec = spec
        self.manager = open_manager(spec.settings)
        self.catalog = self.manager.catalog

    def start(self, question_id: str) -> EpisodeStart:
        return self.manager.create(question_id=question_id).start

    def step(self, episode_id: str, tool: str, arguments: Mapping[str, Any]) -> ToolResult:
        return self.manager.step(episode_id, tool, arguments)

    def end(self, episode_id: str) -> None:
        self.manager.close(episode_id)

    def worker_spec(self) -> DoorSpec:
        return self.spec

    def close(self) -> None:
        self.manager.shutdown()
