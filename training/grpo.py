"""GRPO on the environment: TRL's `GRPOTrainer` with `environment_factory`, one `SQLEnvTRL`
episode per rollout, rewarded by the engine (`SQLEnvTRL.get_reward`).

    python -m training.grpo --config training/configs/grpo_qwen3_0.6b.toml
    python -m training.grpo --tiny    # CPU, from the model `python -m training.sft --tiny` saved
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from training.command import command_line, load_run, run_command
from training.config import RunConfig

if TYPE_CHECKING:
    from trl import GRPOTrainer


def grpo_trainer(config: RunConfig) -> GRPOTrainer:
    """A trainer over the configured questions; its environments share one episode manager."""
    from trl import GRPOConfig, GRPOTrainer

    from doors.trl import environment_factory
    from training.datasets import task_dataset
    from training.setup import model_path, open_run

    setup = open_run(config)
    return GRPOTrainer(
        model=model_path(setup),
        args=GRPOConfig(**config.trainer),
        train_dataset=task_dataset(setup.questions),
        environment_factory=environment_factory(setup.manager),
    )


def main(argv: list[str] | None = None) -> int:
    return run_command(command_line("grpo", __doc__.split("\n\n")[0]), train, argv)


def train(arguments: argparse.Namespace) -> None:
    trainer = grpo_trainer(load_run(arguments, "grpo"))
    trainer.train(resume_from_checkpoint=arguments.resume)
    trainer.save_model()
    if arguments.push_to_hub:
        trainer.push_to_hub(arguments.push_to_hub)
    print(f"saved to {trainer.args.output_dir}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
