"""Learning check: does SFT on oracle transcripts teach a tiny model to call the tools?

Builds the tiny model and tokenizer locally, measures the share of held-out prompts whose
greedy first turn is a well-formed tool call, runs the tiny SFT warm start, and measures again.
Held-out questions are the split's questions after the training ones (same seeded order).

    python -m training.learning_check                      # the embedded demo
    python -m training.learning_check --data-dir ../shared/data/spider --split train \\
        --train-limit 200 --held-out 50
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from env_core.command_line import CommandParser
from env_core.settings import Settings, add_arguments, argument_type, whole
from training.command import go_offline, run_command
from training.config import load_config, tiny_config


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="python -m training.learning_check", description=__doc__)
    parser.add_argument(
        "--train-limit", type=argument_type(whole(1)), default=44, help="SFT questions (44)"
    )
    parser.add_argument(
        "--held-out", type=argument_type(whole(1)), default=14, help="held-out prompts (14)"
    )
    parser.add_argument("--epochs", type=float, help="SFT epochs (default: sft_tiny.toml's)")
    parser.add_argument("--output-dir", type=Path, default=Path("outputs/learning-check"))
    add_arguments(parser, groups=("data",))
    return run_command(parser, check, argv)


def check(arguments: argparse.Namespace) -> None:
    # The libraries load once the arguments are read, so that --help answers at once.
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from doors.trl import SQLEnvTRL
    from training.datasets import choose_questions
    from training.setup import model_path, open_run, oracle_dataset
    from training.sft import sft_trainer
    from training.tool_calls import well_formed_rate

    go_offline()

    base = load_config(tiny_config("sft"))
    trainer_settings = {
        **base.trainer,
        "output_dir": str(arguments.output_dir),
        "num_train_epochs": arguments.epochs or base.trainer["num_train_epochs"],
    }
    config = dataclasses.replace(
        base,
        settings=Settings.from_arguments(arguments),
        limit=arguments.train_limit,
        trainer=trainer_settings,
    )
    setup = open_run(config)
    everything = choose_questions(setup.manager.catalog, config.settings.split, seed=config.seed)
    held_out = everything[config.limit : config.limit + arguments.held_out]
    transcripts = oracle_dataset(setup)
    print(f"{len(transcripts)} oracle transcripts for SFT, {len(held_out)} held-out prompts")

    environment = SQLEnvTRL(setup.manager)
    base_dir = model_path(setup, transcripts)
    before = well_formed_rate(
        AutoModelForCausalLM.from_pretrained(base_dir),
        AutoTokenizer.from_pretrained(base_dir),
        environment,
        held_out,
    )
    print(f"well-formed tool calls on held-out prompts before SFT: {before:.0%}")

    trainer = sft_trainer(setup, transcripts, base_dir)
    trainer.train()
    after = well_formed_rate(trainer.model, trainer.processing_class, environment, held_out)
    print(f"well-formed tool calls on held-out prompts after SFT:  {after:.0%}")


if __name__ == "__main__":
    sys.exit(main())
