"""`SQLEnvSkyRL`: the environment skyrl-gym makes for each rollout (`env_class: sqlenv`).

SkyRL makes one instance per trajectory with the row's fields as `extras`, calls `init` with
the row's prompt, then `step` with each raw model turn. A turn is read for one tool call in the
Hermes form chat templates emit (`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`),
made on the engine, and answered with the engine's text as a user turn (SkyRL's convention for
observations) and the engine's step reward. A turn without a well-formed call is made as a
call with no tool name, which the engine refuses as an unknown tool (no step spent).

SkyRL leaves the end of a trajectory to the environment, which it hands its `max_turns`
(`generator.max_turns`, 1 unless set); here the turn limit is the episode's step budget
instead, so a trajectory of calls ends when the engine ends the episode, never before. A turn
without a step still counts as a turn: at the limit the episode ends unanswered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from env_core.errors import InvalidArgumentError, shown
from env_core.factory import shared_manager
from env_core.hermes import parse_arguments, parse_hermes
from env_core.holder import EpisodeHolder
from env_core.manager import SELECTORS, EpisodeManager

ENV_ID = "sqlenv"
NO_EPISODE = "no episode is running; SkyRL calls init first"
BAD_PROMPT = "the prompt must end with a turn whose content is text, to which the opening is added"


class SQLEnvSkyRL(BaseTextEnv):
    """One trajectory's episode, started by `init` from the row's `extra_info` selectors."""

    def __init__(
        self,
        env_config: Any = None,
        extras: dict[str, Any] | None = None,
        manager: EpisodeManager | None = None,
    ) -> None:
        super().__init__()
        extra_info = (extras or {}).get("extra_info") or {}
        if not isinstance(extra_info, Mapping):
            raise InvalidArgumentError(
                f"extra_info must be a mapping of the episode's selectors, not {shown(extra_info)}"
            )
        self.selectors = {name: extra_info[name] for name in SELECTORS if name in extra_info}
        self._held = EpisodeHolder(manager or shared_manager(), idle=NO_EPISODE)

    def init(self, prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The row's prompt with the engine's opening text appended to its last turn."""
        last = prompt[-1] if len(prompt) else None
        if not (isinstance(last, Mapping) and isinstance(last.get("content"), str)):
            raise InvalidArgumentError(BAD_PROMPT)  # before the episode starts: nothing to end
        episode = self._held.start(**self.selectors)
        self.max_turns = episode.max_steps
        *head, last = prompt
        opened = {**last, "content": last["content"] + episode.start.text}
        return [*head, opened], {"episode_id": episode.episode_id}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        calls = parse_hermes(action).tool_calls
        name, arguments = (
            (calls[0].name, parse_arguments(calls[0].arguments)) if calls else ("", None)
        )
        result = self._held.call(name, arguments)
        reward, done = result.reward, result.done
        if not done and self.turns >= self.max_turns:
            reward, done = round(reward + self._held.episode.abandon(), 6), True
        return BaseTextEnvStepOutput(
            observations=[{"role": "user", "content": result.text}],
            reward=reward,
            done=done,
            metadata=result.structured(),
        )

    def close(self) -> None:
        """End the episode; one left unanswered books the wrong-answer reward."""
        self._held.abandon()
        self._held.close("the SkyRL environment was closed")


def register() -> None:
    """Make `env_class: sqlenv` known to skyrl-gym (done on importing `doors.skyrl`)."""
    from skyrl_gym.envs.registration import register as skyrl_register
    from skyrl_gym.envs.registration import registry

    if ENV_ID not in registry:
        skyrl_register(id=ENV_ID, entry_point="doors.skyrl.environment:SQLEnvSkyRL")
