"""The TRL door: an `environment_factory` class for `GRPOTrainer` over the engine's sessions."""

from adapters.trl.environment import (
    SQLEnvTRL,
    environment_factory,
    episode_reward,
    open_environment_factory,
    tool_methods,
)

__all__ = [
    "SQLEnvTRL",
    "environment_factory",
    "episode_reward",
    "open_environment_factory",
    "tool_methods",
]
