"""The TRL door: an `environment_factory` class for `GRPOTrainer` over the episode manager."""

from doors.trl.environment import (
    SQLEnvTRL,
    environment_factory,
    episode_reward,
    tool_methods,
)

__all__ = [
    "SQLEnvTRL",
    "environment_factory",
    "episode_reward",
    "tool_methods",
]
