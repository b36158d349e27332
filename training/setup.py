"""What the SFT and GRPO entry points share: the episode manager, questions and the model."""

from __future__ import annotations

import json
from dataclasses import dataclass

from datasets import Dataset

from doors.trl import SQLEnvTRL
from env_core.catalog import Question
from env_core.factory import open_manager
from env_core.manager import EpisodeManager
from training.config import RunConfig
from training.datasets import choose_questions
from training.tiny import build_tiny
from training.transcripts import sft_dataset


@dataclass
class RunSetup:
    config: RunConfig
    manager: EpisodeManager
    questions: list[Question]


def open_run(config: RunConfig) -> RunSetup:
    # Every rollout of a generation batch holds an episode at once.
    manager = open_manager(config.settings, max_episodes=4096)
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
