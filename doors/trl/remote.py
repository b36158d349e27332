"""`RemoteSQLEnvTRL`: the TRL environment class played on a hosted OpenEnv server (a container, a
Hugging Face Space, replicas behind a balancer) instead of in the trainer's process.

    trainer = GRPOTrainer(
        ...,
        environment_factory=functools.partial(RemoteSQLEnvTRL, "https://USER-sqlenv.hf.space"),
    )

Each instance, one rollout, holds one WebSocket session through the typed client, so the server
must allow as many sessions as rollouts run at once, from one client address
(`SQLENV_MAX_EPISODES`, `SQLENV_MAX_SESSIONS_PER_CLIENT`, `SQLENV_MAX_EPISODES_PER_CLIENT`).
The tools, their descriptions and their texts are `SQLEnvTRL`'s, for a server with the default
row limits; the server's rewards must be the shaped or the sparse profile (`REMOTE_PROFILES`).
An instance dropped without being closed closes its connection when garbage-collected. A reset
the server refuses raises the engine's error, as in process (`SQLEnvError`'s kind and sentence,
sent structured by the server); a server that cannot serve a remote rollout raises `ServerError`.

An episode lives in its server session: when the connection drops (the server restarts, a
replica is killed, a call outlasts the client's message timeout), the client's next call opens
a new session and the episode is gone. The rollout is then told so (`LOST`) on every call
until the next reset, rather than the new session's "call reset first", and the trainer's log
says which episode was lost; its reward is what the steps before booked.
"""

from __future__ import annotations

import functools
import logging
import weakref
from typing import Any

from openenv.core.env_server.mcp_types import CallToolAction

from doors.openenv.client import SQLEnvClient
from doors.trl.environment import SQLEnvTRL
from env_core.errors import UnknownEpisodeError, error_from
from env_core.holder import close_dropped, dropped
from env_core.render import error_text
from env_core.rewards import booked
from serving.server_reads import ServerError, get_json

# The reward profiles under which an unanswered episode's total is the sum of its step rewards
# (no refund, a wrong answer worth 0), as in process: the server cannot be asked to end an
# episode and book what the others add at its end.
REMOTE_PROFILES = ("shaped", "sparse")
LOST = error_text(
    UnknownEpisodeError(
        "the connection to the environment server was lost, and this episode with it; "
        "the episode is over"
    )
)

log = logging.getLogger(__name__)


class RemoteSQLEnvTRL(SQLEnvTRL):
    """One rollout's episode on the server at `base_url`."""

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url
        self._client = SQLEnvClient(base_url=base_url).sync()
        self._total_reward = 0.0
        self._episode_id: str | None = None
        self._lost = False
        # An instance dropped unclosed closes its connection, and so its server session, when
        # garbage-collected.
        self._closing = weakref.finalize(self, dropped().put, self._client.close)

    def _start(self, **selectors: Any) -> str:
        """Start the episode a dataset row names on the server; returns its opening text."""
        close_dropped()
        _check_rewards(self._base_url)
        started = self._client.reset(**{k: v for k, v in selectors.items() if v is not None})
        if started.observation.error:  # the engine's error, structured as `data`
            raise error_from(started.observation.data)
        self._total_reward = 0.0
        self._episode_id = started.observation.episode_id
        self._lost = False
        return started.observation.text

    def get_reward(self) -> float:
        """The sum of the episode's step rewards, as the server gave them: for an episode left
        unanswered, what `SQLEnvTRL` gives under the profiles a remote rollout may use."""
        return self._total_reward

    def __enter__(self) -> RemoteSQLEnvTRL:
        return self

    def __exit__(self, *_exc: object) -> None:
        # Not a public method: TRL would offer it to the model as a tool.
        self._closing.detach()
        self._client.close()

    def _call(self, tool: str, arguments: dict[str, Any]) -> str:
        if self._lost:
            return LOST
        try:
            result = self._client.step(CallToolAction(tool_name=tool, arguments=arguments))
        except OSError as error:  # the client's ServerError: closed, timed out, garbled, refused
            return self._lose(str(error))
        if self._episode_id is not None and result.observation.episode_id != self._episode_id:
            # The client has reconnected: the new session holds no episode.
            return self._lose(f"a new session answered {result.observation.text!r}")
        self._total_reward = booked(self._total_reward, result.reward or 0.0)
        return result.observation.text

    def _lose(self, why: str) -> str:
        self._lost = True
        log.warning(
            "episode %s on %s was lost with its connection (%s); its rollout keeps the reward "
            "booked before, %s",
            self._episode_id,
            self._base_url,
            why,
            self._total_reward,
        )
        return LOST


@functools.cache
def _check_rewards(base_url: str) -> None:
    """Refuse a server whose rewards a remote rollout would sum differently from in process."""
    served = get_json(base_url, "/catalog", "OpenEnv server")
    profile = served.get("reward_profile")
    if profile not in REMOTE_PROFILES:
        raise ServerError(
            f"the server at {base_url} serves the {profile!r} reward profile, which ends an "
            "unanswered episode with an adjustment a remote rollout cannot ask for; serve "
            f"--reward-profile {' or '.join(REMOTE_PROFILES)}, or train in process with SQLEnvTRL"
        )
