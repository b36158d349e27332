"""Doors: the ways `evaluate` reaches the environment, all giving the engine's own result types.

Every door starts an episode on a named question and makes tool calls on it; the harness keeps
its own `Catalog` of the same data (for the question list, hardness and the oracle), so a door
only has to move calls and results.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from env_core.catalog import Catalog
from env_core.demo import resolve_data_dir
from env_core.episode import EpisodeStart, ToolResult
from env_core.factory import open_sessions

DOOR_KINDS = ("inprocess", "mcp-stdio", "mcp-http", "openenv")


@dataclass(frozen=True)
class DoorSpec:
    """Everything needed to open a door, in a form that can be sent to worker processes.

    `url` names a server that is already running (mcp-http, openenv); without it the door
    starts its own server on a free 127.0.0.1 port.
    """

    kind: str = "inprocess"
    data_dir: str | None = None
    split: str = "dev"
    cache_dir: str | None = None
    max_steps: int = 15
    url: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in DOOR_KINDS:
            raise ValueError(f"unknown door {self.kind!r}; doors are: {', '.join(DOOR_KINDS)}")

    def load_catalog(self) -> Catalog:
        cache = Path(self.cache_dir) if self.cache_dir else None
        return Catalog.load(resolve_data_dir(self.data_dir, cache), [self.split], cache_dir=cache)

    def server_args(self) -> list[str]:
        """The data options for a server process of this spec."""
        args = ["--split", self.split, "--max-steps", str(self.max_steps)]
        if self.data_dir:
            args += ["--data-dir", self.data_dir]
        if self.cache_dir:
            args += ["--cache-dir", self.cache_dir]
        return args


class Door(Protocol):
    catalog: Catalog

    def start(self, question_id: str) -> EpisodeStart: ...

    def step(self, episode_id: str, tool: str, arguments: Mapping[str, Any]) -> ToolResult: ...

    def end(self, episode_id: str) -> None: ...

    def worker_spec(self) -> DoorSpec:
        """A spec that worker processes open to reach the same environment."""
        ...

    def close(self) -> None: ...


class InProcessDoor:
    """The engine's session manager, called directly."""

    def __init__(self, spec: DoorSpec) -> None:
        cache = Path(spec.cache_dir) if spec.cache_dir else None
        self.spec = spec
        self.sessions = open_sessions(
            spec.data_dir, split=spec.split, cache_dir=cache, max_steps=spec.max_steps
        )
        self.catalog = self.sessions.catalog

    def start(self, question_id: str) -> EpisodeStart:
        return self.sessions.create(question_id=question_id).start

    def step(self, episode_id: str, tool: str, arguments: Mapping[str, Any]) -> ToolResult:
        return self.sessions.step(episode_id, tool, arguments)

    def end(self, episode_id: str) -> None:
        self.sessions.close(episode_id)

    def worker_spec(self) -> DoorSpec:
        return self.spec

    def close(self) -> None:
        self.sessions.shutdown()


def open_door(spec: DoorSpec) -> Door:
    if spec.kind == "inprocess":
        return InProcessDoor(spec)
    if spec.kind in ("mcp-stdio", "mcp-http"):
        from evals.mcp_door import MCPDoor

        return MCPDoor(spec)
    from evals.openenv_door import OpenEnvDoor

    return OpenEnvDoor(spec)


def with_url(spec: DoorSpec, url: str) -> DoorSpec:
    return replace(spec, url=url)
