"""SFT warm start: fine-tune a model on the oracle's tool-calling transcripts with TRL's
`SFTTrainer`, so that GRPO starts from a policy that already calls the tools well-formedly.

    python -m training.sft --config training/configs/sft_qwen3_0.6b.toml
    python -m training.sft --tiny          # CPU: builds a tiny model locally, no download
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from training.command import command_line, load_run, run_command
from training.config import RunConfig

if TYPE_CHECKING:
    from datasets import Dataset
    from trl import SFTTrainer

    from training.setup import RunSetup


def sft_trainer(setup: RunSetup, transcripts: Dataset, path: str) -> SFTTrainer:
    from trl import SFTConfig, SFTTrainer

    # A path, not a model: TRL loads it with the config's `model_init_kwargs` (dtype, ...).
    return SFTTrainer(
        model=path,
        args=SFTConfig(**setup.config.trainer),
        train_dataset=transcripts.remove_columns("question_id"),
    )


def run_sft(config: RunConfig, resume: str | bool | None = None) -> SFTTrainer:
    """Train, save the model and tokenizer to the output dir, and return the trainer."""
    from training.setup import model_path, open_run, oracle_dataset

    setup = open_run(config)
    transcripts = oracle_dataset(setup)
    trainer = sft_trainer(setup, transcripts, model_path(setup, transcripts))
    trainer.train(resume_from_checkpoint=resume)
    trainer.save_model()
    return trainer


def main(argv: list[str] | None = None) -> int:
    return run_command(command_line("sft", __doc__.split("\n\n")[0]), train, argv)


def train(arguments: argparse.Namespace) -> None:
    trainer = run_sft(load_run(arguments, "sft"), arguments.resume)
    if arguments.push_to_hub:
        trainer.push_to_hub(arguments.push_to_hub)
    print(f"saved to {trainer.args.output_dir}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
