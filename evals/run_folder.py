"""A run's folder: `run.json` (what was run), `episodes.jsonl` (one finished episode a line),
`summary.json` (the statistics). Episodes are appended and synced as they finish, so a run that
is killed loses at most the episodes in flight, and a restart skips the finished ones. A
finished run is read back from its folder as a `Run`, for reports and comparisons.

Each record carries an HMAC-SHA256 of its content, under a key made for the run folder and kept
outside it (`run_keys_dir()`, readable by its owner only), so a record edited after it was
written (a verdict turned to `correct: true`) is reported rather than counted: anyone who can
edit the folder, or copy it, still cannot sign a record. A hash chain would detect corruption
but not an edit, since anyone can recompute it. A line that cannot be read is reported with its
file and line number and the folder is left as it is; only an unfinished last line (no newline:
a killed run was writing it) is dropped.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.metrics import Summary
from evals.play import EpisodeRecord

# What must match for a restarted run to reuse finished episodes. The episode count may grow:
# a shorter run's plan is a prefix of a longer one's. The door may change: doors agree. The data
# is compared by what the split asks (`Split.fingerprint`), however its folder is named.
RESUME_KEYS = ("policy", "split", "seed", "catalog", "max_steps", "reward_profile")


class ResumeMismatchError(ValueError):
    pass


class RunFolderError(ValueError):
    """A run folder's file cannot be trusted or read; the message names the file."""


def run_keys_dir() -> Path:
    """Where the run folders' keys are kept: $XDG_STATE_HOME/sqlenv/run-keys."""
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state) / "sqlenv" / "run-keys"


class RunFolder:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.config_file = self.path / "run.json"
        self.episodes_file = self.path / "episodes.jsonl"
        self.summary_file = self.path / "summary.json"
        self._key: bytes | None = None  # known once the folder is opened or read

    def open(self, config: dict[str, Any]) -> dict[int, EpisodeRecord]:
        """Start or resume the run `config` describes; returns the episodes already finished."""
        self.path.mkdir(parents=True, exist_ok=True)
        if self.config_file.is_file():
            previous = self.read_config()
            changed = [key for key in RESUME_KEYS if previous.get(key) != config.get(key)]
            if changed:
                differences = "; ".join(
                    f"{key} {previous.get(key)!r} there, {config.get(key)!r} here"
                    for key in changed
                )
                raise ResumeMismatchError(
                    f"{self.path} holds a different run ({differences}); use another --out folder"
                )
            self._key = self._read_key(previous)
            config = {**config, "run_id": previous["run_id"]}
        else:
            config = {**config, "run_id": secrets.token_hex(16)}
            self._key = self._make_key(config["run_id"])
        self.config_file.write_text(json.dumps(config, indent=2) + "\n")
        finished = self.read_episodes()
        # Rewrite without a torn last line or duplicates before appending to the file again.
        self._write_all(finished.values())
        return finished

    def read_episodes(self) -> dict[int, EpisodeRecord]:
        finished: dict[int, EpisodeRecord] = {}
        if not self.episodes_file.is_file():
            return finished
        key = self._key or self._read_key(self.read_config())
        text = self.episodes_file.read_text()
        lines = text.splitlines()
        if lines and not text.endswith("\n"):
            lines.pop()  # the line a killed run was writing
        for number, line in enumerate(lines, 1):
            record = self._verified(line, key, number)
            finished.setdefault(record.index, record)
        return finished

    def append(self, record: EpisodeRecord) -> None:
        with self.episodes_file.open("a") as out:
            out.write(self._signed(record) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def read_config(self) -> dict[str, Any]:
        try:
            config = json.loads(self.config_file.read_text())
        except ValueError as error:
            raise RunFolderError(f"{self.config_file} is not readable JSON ({error})") from None
        if not isinstance(config, dict):
            raise RunFolderError(f"{self.config_file} holds no run description")
        return config

    def _write_all(self, records) -> None:
        partial = self.episodes_file.with_suffix(".jsonl.tmp")
        with partial.open("w") as out:
            for record in sorted(records, key=lambda r: r.index):
                out.write(self._signed(record) + "\n")
        partial.replace(self.episodes_file)

    def _signed(self, record: EpisodeRecord) -> str:
        content = record.to_dict()
        return json.dumps({**content, "mac": _mac(self._key, content)})

    def _verified(self, line: str, key: bytes, number: int) -> EpisodeRecord:
        where = f"{self.episodes_file}:{number}"
        try:
            content = json.loads(line)
            mac = content.pop("mac", None) if isinstance(content, dict) else None
        except ValueError as error:
            raise RunFolderError(f"{where} is not a JSON record ({error})") from None
        if not isinstance(mac, str) or not hmac.compare_digest(mac, _mac(key, content)):
            raise RunFolderError(
                f"{where} does not match its integrity check: the record was changed after "
                "the run wrote it (or by another run)"
            )
        try:
            return EpisodeRecord.from_dict(content)
        except (ValueError, TypeError, KeyError) as error:
            raise RunFolderError(f"{where} is not an episode record ({error!r})") from None

    def _make_key(self, run_id: str) -> bytes:
        keys = run_keys_dir()
        keys.mkdir(mode=0o700, parents=True, exist_ok=True)
        key = secrets.token_bytes(32)
        descriptor = os.open(keys / run_id, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as out:
            out.write(key)
        return key

    def _read_key(self, config: dict[str, Any]) -> bytes:
        run_id = config.get("run_id")
        if not isinstance(run_id, str) or not run_id.isalnum():
            raise RunFolderError(
                f"{self.config_file} names no run_id, so its records cannot be checked "
                "(written by an earlier version?); use another --out folder"
            )
        try:
            return (run_keys_dir() / run_id).read_bytes()
        except FileNotFoundError:
            raise RunFolderError(
                f"the key that checks the records of {self.path} is not on this machine "
                f"({run_keys_dir() / run_id}): it is made where the run was first written"
            ) from None


def _mac(key: bytes, content: Any) -> str:
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()


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
