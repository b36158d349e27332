"""What a door is, and what it takes to open one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from env_core.catalog import Catalog
from env_core.episode import EpisodeStart, ToolResult
from env_core.errors import DataError
from env_core.factory import load_catalog
from env_core.settings import Settings

DOOR_KINDS = ("inprocess", "mcp-stdio", "mcp-http", "openenv")


@dataclass(frozen=True)
class DoorSpec:
    """Everything needed to open a door, in a form that can be sent to worker processes.

    `settings` are the environment's (data, episodes, SQL limits); a door that starts a server
    starts it with them. `url` names a server that is already running (mcp-http, openenv);
    without it the door starts its own server on a free 127.0.0.1 port.
    """

    kind: str = "inprocess"
    settings: Settings = field(default_factory=Settings)
    url: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in DOOR_KINDS:
            raise ValueError(f"unknown door {self.kind!r}; doors are: {', '.join(DOOR_KINDS)}")

    def load_catalog(self) -> Catalog:
        return load_catalog(self.settings)

    def server_arguments(self) -> list[str]:
        """The flags that give a server process this spec's settings."""
        return self.settings.arguments()

    def at(self, url: str) -> DoorSpec:
        """The same environment, reached at a running server."""
        return replace(self, url=url)


def check_same_catalog(url: str, served: dict[str, Any], catalog: Catalog, split: str) -> None:
    """Raise `DataError` unless the server at `url` serves the split this evaluation plans
    over, question for question (a different data directory or version would grade the same
    question ids against other answers)."""
    ours = catalog.splits[split]
    theirs = (served.get("split"), served.get("questions"), served.get("fingerprint"))
    if theirs != (ours.name, len(ours.questions), ours.fingerprint):
        raise DataError(
            f"the server at {url} serves other questions than this evaluation's catalog "
            f"(split {theirs[0]!r}: {theirs[1]} questions, catalog {theirs[2]}; here split "
            f"{ours.name!r}: {len(ours.questions)} questions, catalog {ours.fingerprint}); "
            "give the evaluation the server's --data-dir and --split"
        )


def check_same_episodes(url: str, served: dict[str, Any], settings: Settings) -> None:
    """Raise `DataError` unless the server at `url` runs episodes with this evaluation's step
    budget and reward profile (the run records them as its own)."""
    theirs = (served.get("max_steps"), served.get("reward_profile"))
    ours = (settings.max_steps, settings.reward_profile)
    if theirs != ours:
        raise DataError(
            f"the server at {url} runs episodes of {theirs[0]} steps with {theirs[1]!r} "
            f"rewards, not the {ours[0]} steps with {ours[1]!r} rewards this evaluation "
            "records; give it the server's --max-steps and --reward-profile"
        )


class DoorClient(Protocol):
    """A client of a door. `start` raises the engine's error (an `SQLEnvError`) when the
    episode cannot start; `step` returns the engine's result, a refusal included."""

    catalog: Catalog

    def start(self, question_id: str) -> EpisodeStart: ...

    def step(self, episode_id: str, tool: str, arguments: Mapping[str, Any]) -> ToolResult: ...

    def end(self, episode_id: str) -> None: ...

    def worker_spec(self) -> DoorSpec:
        """A spec that worker processes open to reach the same environment."""
        ...

    def close(self) -> None: ...
