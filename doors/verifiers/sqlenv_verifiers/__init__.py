"""The verifiers door: `vf-eval sqlenv-verifiers` evaluates a model on the engine's questions."""

from sqlenv_verifiers.taskset import SQLTaskset

__all__ = ["SQLTaskset"]
