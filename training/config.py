"""Run configuration for the SFT and GRPO entry points, read from TOML files.

A file has four tables: `[model]` (`name_or_path`; without it, `tiny = true` builds a tiny model
locally), `[data]` (which questions: `limit`, `seed`, `max_chars`), `[env]` (the environment's
settings, named as in `env_core.settings`: `data_dir`, `split`, `reward_profile`, ..., but for
the step budget, `step_budget`; unset ones come from the `SQLENV_*` variables, else their
defaults) and `[trainer]`, passed as is to TRL's `SFTConfig` or `GRPOConfig`. Relative paths
are resolved against the current directory, as every path on a command line is.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from env_core.settings import Settings

CONFIG_DIR = Path(__file__).parent / "configs"
TABLES = ("model", "data", "env", "trainer")
# [env]'s names of the settings it does not name by field: [trainer]'s `max_steps` is TRL's, a
# count of optimiser steps, so an episode's step budget is named otherwise beside it.
ENV_NAMES = {"step_budget": "max_steps"}


@dataclass(frozen=True)
class RunConfig:
    name_or_path: str | None = None
    tiny: bool = False
    limit: int | None = None
    seed: int = 0
    max_chars: int | None = None
    settings: Settings = field(default_factory=Settings)
    trainer: dict[str, Any] = field(default_factory=dict)

    @property
    def output_dir(self) -> Path:
        return Path(self.trainer["output_dir"])


def load_config(path: str | Path) -> RunConfig:
    try:
        tables = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{path}: cannot read the configuration: {error}") from None
    unknown = sorted(set(tables) - set(TABLES))
    if unknown:
        raise ValueError(f"{path}: unknown tables {', '.join(unknown)}; tables are: {TABLES}")
    if "output_dir" not in tables.get("trainer", {}):
        raise ValueError(f"{path}: [trainer] needs output_dir")
    try:
        config = RunConfig(
            **tables.get("model", {}),
            **tables.get("data", {}),
            settings=env_settings(tables.get("env", {}), f"{path} [env]"),
            trainer=tables["trainer"],
        )
    except TypeError as error:  # an unknown key in [model] or [data]
        raise ValueError(f"{path}: {error}") from None
    if config.name_or_path is None and not config.tiny:
        raise ValueError(f"{path}: [model] needs name_or_path, or tiny = true")
    return config


def env_settings(values: dict[str, Any], where: str) -> Settings:
    if "max_steps" in values:
        raise ValueError(
            f"{where}: max_steps is now step_budget, the tool calls of one episode "
            "([trainer] max_steps counts optimiser steps): rename it"
        )
    return Settings.from_mapping(values, where, ENV_NAMES)


def tiny_config(stage: str) -> Path:
    """The CPU configuration of a stage ("sft" or "grpo")."""
    return CONFIG_DIR / f"{stage}_tiny.toml"


def stage_config(stage: str, model: str = "tiny") -> RunConfig:
    """The shipped configuration of a stage ("sft" or "grpo") for a model: "tiny" (a CPU run on
    a tiny model built locally) or a file's model part, such as "qwen3_0.6b"."""
    return load_config(CONFIG_DIR / f"{stage}_{model}.toml")
