"""The training commands' command lines, read before any training library loads: `--help`
and a mistake answer at once, with or without the `train` extra."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from env_core.command_line import CommandParser, run_main
from env_core.extras import require_extra
from training.config import RunConfig, load_config, tiny_config

OFFLINE = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


def command_line(stage: str, description: str) -> argparse.ArgumentParser:
    parser = CommandParser(prog=f"python -m training.{stage}", description=description)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", type=Path, help="a TOML run configuration")
    source.add_argument(
        "--tiny",
        action="store_true",
        help=f"the CPU run of training/configs/{stage}_tiny.toml (tiny local model, offline)",
    )
    parser.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        help="resume from the last checkpoint in output_dir, or from the checkpoint given",
    )
    parser.add_argument("--push-to-hub", metavar="REPO_ID", help="push the result to this repo")
    return parser


def run_command(
    parser: argparse.ArgumentParser,
    work: Callable[[argparse.Namespace], None],
    argv: list[str] | None,
) -> int:
    """Read the arguments, then do the work if the `train` extra is installed."""
    arguments = parser.parse_args(argv)

    def run() -> None:
        require_extra("train", "training")
        work(arguments)

    return run_main(parser.prog, run)


def load_run(arguments: argparse.Namespace, stage: str) -> RunConfig:
    config = load_config(tiny_config(stage) if arguments.tiny else arguments.config)
    if config.tiny or arguments.tiny:
        go_offline()
    return config


def go_offline() -> None:
    """A tiny run builds its model locally: no library may reach for a hub."""
    for name in OFFLINE:
        os.environ.setdefault(name, "1")
