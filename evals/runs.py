"""A finished run read back from its folder, for reports and comparisons."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.metrics import Summary
from evals.records import RunFolder
from evals.runner import EpisodeRecord


@dataclass(frozen=True)
class Run:
    label: str
    config: dict[str, Any]
    summary: Summary
    records: list[EpisodeRecord]

    @classmethod
    def load(cls, path: str | Path, label: str | None = None) -> Run:
        folder = RunFolder(path)
        if not folder.config_file.is_file():
            raise FileNotFoundError(f"{path} is not a run folder: it has no run.json")
        config = folder.read_config()
        # A run resumed with fewer episodes keeps the extra ones in the file, unused.
        finished = folder.read_episodes()
        records = [finished[i] for i in sorted(finished) if i < config["episodes"]]
        return cls(label or _default_label(config), config, Summary.of(records), records)


def _default_label(config: dict[str, Any]) -> str:
    return f"{config['policy']} ({config['door']})"
