"""What the SFT and GRPO entry points share: the session manager, questions and the model."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from pathlib import Path

from datasets import Dataset

from adapters.trl import SQLEnvTRL
from env_core.catalog import Question
from env_core.command_line import CommandParser
from env_core.factory import open_sessions
from env_core.sessions import SessionManager
from training.config import RunConfig, load_config, tiny_config
from training.datasets import choose_questions
from training.tiny import build_tiny
from training.transcripts import sft_dataset

OFFLINE = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


@dataclass
class RunSetup:
    config: RunConfig
    manager: SessionManager
    questions: list[Question]


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


def load_run(arguments: argparse.Namespace, stage: str) -> RunConfig:
    config = load_config(tiny_config(stage) if arguments.tiny else arguments.config)
    if config.tiny or arguments.tiny:
        for name in OFFLINE:
            os.environ.setdefault(name, "1")
    return config


def open_run(config: RunConfig) -> RunSetup:
    # Every rollout of a generation batch holds an episode at once.
    manager = open_sessions(config.settings, max_episodes=4096)
    split = config.settings.split
    questions = choose_questions(manager.catalog, split, config.limit, config.seed)
    return RunSetup(config, manager, questions)


def oracle_dataset(setup: RunSetup) -> Dataset:
    return sft_dataset(SQLEnvTRL(setup.manager), setup.questions, setup.config.max_chars)


def model_path(setup: RunSetup, transcripts: Dataset | None = None) -> str:
    """The configured model, or (tiny mode without one) a tiny model built beside the output.

    The tiny tokenizer is trained on the oracle transcripts of the run's own questions.
    """
    if setup.config.name_or_path is not None:
        return setup.config.name_or_path
    transcripts = transcripts if transcripts is not None else oracle_dataset(setup)
    tools = json.loads(transcripts[0]["tools"])
    return str(build_tiny(transcripts["messages"], tools, setup.config.output_dir / "tiny-base"))
