"""A run's folder: `run.json` (what was run), `episodes.jsonl` (one finished episode a line),
`summary.json` (the statistics). Episodes are appended and synced as they finish, so a run that
is killed loses at most the episodes in flight, and a restart skips the finished ones. A
finished run is read back from its folder as a `Run`, for reports and comparisons.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.metrics import Summary
from evals.play import EpisodeRecord

# What must match for a restarted run to reuse finished episodes. The episode count may grow:
# a shorter run's plan is a prefix of a longer one's. The door may change: doors agree.
RESUME_KEYS = ("policy", "split", "seed", "data_dir", "max_steps", "reward_profile")


class ResumeMismatchError(ValueError):
    pass


class RunFolder:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.config_file = self.path / "run.json"
        self.episodes_file = self.path / "episodes.jsonl"
        self.summary_file = self.path / "summary.json"

    def open(self, config: dict[str, Any]) -> dict[int, EpisodeRecord]:
        """Start or resume the run `config` describes; returns the episodes already finished."""
        self.path.mkdir(parents=True, exist_ok=True)
        if self.config_file.is_file():
            previous = json.loads(self.config_file.read_text())
            changed = [key for key in RESUME_KEYS if previous.get(key) != config.get(key)]
            if changed:
                raise ResumeMismatchError(
                    f"{self.path} holds a different run ({', '.join(changed)} differ); "
                    "use another --out folder"
                )
        self.config_file.write_text(json.dumps(config, indent=2) + "\n")
        finished = self.read_episodes()
        # Rewrite without a torn last line or duplicates before appending to the file again.
        self._write_all(finished.values())
        return finished

    def read_episodes(self) -> dict[int, EpisodeRecord]:
        finished: dict[int, EpisodeRecord] = {}
        if not self.episodes_file.is_file():
            return finished
        for line in self.episodes_file.read_text().splitlines():
            try:
                record = EpisodeRecord.from_dict(json.loads(line))
            except (ValueError, TypeError, KeyError):
                continue  # the line a killed run was writing
            finished.setdefault(record.index, record)
        return finished

    def append(self, record: EpisodeRecord) -> None:
        with self.episodes_file.open("a") as out:
            out.write(json.dumps(record.to_dict()) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def read_config(self) -> dict[str, Any]:
        return json.loads(self.config_file.read_text())

    def _write_all(self, records) -> None:
        partial = self.episodes_file.with_suffix(".jsonl.tmp")
        with partial.open("w") as out:
            for record in sorted(records, key=lambda r: r.index):
                out.write(json.dumps(record.to_dict()) + "\n")
        partial.replace(self.episodes_file)


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
