"""Run configuration for the SFT and GRPO entry points, read from TOML files.

A file has four tables: `[model]` (`name_or_path`; without it, `tiny = true` builds a tiny model
locally), `[data]` (`data_dir`, `split`, `limit`, `seed`, `max_chars`), `[env]` (`max_steps`,
`reward_profile`) and `[trainer]`, passed as is to TRL's `SFTConfig` or `GRPOConfig`. Relative
paths are resolved against the current directory, as every path on a command line is.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIG_DIR = Path(__file__).parent / "configs"


@dataclass(frozen=True)
class RunConfig:
    name_or_path: str | None = None
    tiny: bool = False
    data_dir: str | None = None
    split: str = "dev"
    limit: int | None = None
    seed: int = 0
    max_chars: int | None = None
    max_steps: int = 15
    reward_profile: str = "shaped"
    trainer: dict[str, Any] = field(default_factory=dict)

    @property
    def output_dir(self) -> Path:
        return Path(self.trainer["output_dir"])


def load_config(path: str | Path) -> RunConfig:
    tables = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    unknown = set(tables) - {"model", "data", "env", "trainer"}
    if unknown:
        raise ValueError(f"{path}: unknown tables {sorted(unknown)}")
    if "output_dir" not in tables.get("trainer", {}):
        raise ValueError(f"{path}: [trainer] needs output_dir")
    config = RunConfig(
        **tables.get("model", {}),
        **tables.get("data", {}),
        **tables.get("env", {}),
        trainer=tables["trainer"],
    )
    if config.name_or_path is None and not config.tiny:
        raise ValueError(f"{path}: [model] needs name_or_path, or tiny = true")
    return config


def tiny_config(stage: str) -> Path:
    """The CPU configuration of a stage ("sft" or "grpo")."""
    return CONFIG_DIR / f"{stage}_tiny.toml"
