"""`RemoteSQLEnvTRL`: the TRL environment class played on a hosted OpenEnv server (a container, a
Hugging Face Space, replicas behind a balancer) instead of in the trainer's process.

    trainer = GRPOTrainer(
        ...,
        environment_factory=functools.partial(RemoteSQLEnvTRL, "https://USER-sqlenv.hf.space"),
    )

Each instance, one rollout, holds one WebSocket session through the typed client, so the server
must allow as many sessions as rollouts run at once, from one client address
(`SQLENV_MAX_EPISODES`, `SQLENV_MAX_CONNECTIONS_PER_CLIENT`, `SQLENV_MAX_EPISODES_PER_CLIENT`).
The tools, their descriptions and their texts are `SQLEnvTRL`'s, for a server with the default
row limits.
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.mcp_types import CallToolAction

from adapters.openenv.client import SQLEnvClient
from adapters.trl.environment import SQLEnvTRL


class RemoteSQLEnvTRL(SQLEnvTRL):
    """One rollout's episode on the server at `base_url`."""

    def __init__(self, base_url: str) -> None:
        self._episode = None
        self._client = SQLEnvClient(base_url=base_url).sync()
        self._total_reward = 0.0

    def reset(
        self,
        question_id: str | None = None,
        db_id: str | None = None,
        seed: int | None = None,
        split: str | None = None,
        **_row: Any,
    ) -> str:
        """Start the episode a dataset row names on the server; returns its opening text."""
        chosen = {"question_id": question_id, "db_id": db_id, "seed": seed, "split": split}
        started = self._client.reset(**{k: v for k, v in chosen.items() if v is not None})
        if started.observation.error:
            raise RuntimeError(
                f"the server could not start an episode: {started.observation.error}"
            )
        self._total_reward = 0.0
        return started.observation.text

    def get_reward(self) -> float:
        """The sum of the episode's step rewards, as the server gave them. (An episode left
        unanswered gets no end-of-episode adjustment, unlike in process.)"""
        return self._total_reward

    def __enter__(self) -> RemoteSQLEnvTRL:
        return self

    def __exit__(self, *_exc: object) -> None:
        # Not a public method: TRL would offer it to the model as a tool.
        self._client.close()

    def _call(self, tool: str, arguments: dict[str, Any]) -> str:
        result = self._client.step(CallToolAction(tool_name=tool, arguments=arguments))
        self._total_reward += result.reward or 0.0
        return result.observation.text
