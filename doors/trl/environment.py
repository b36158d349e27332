"""`SQLEnvTRL`: the environment class TRL's `GRPOTrainer(environment_factory=...)` instantiates.

TRL exposes every public function of the class as a tool, renders its Google-style docstring
as the tool's JSON schema, and calls `reset(**row)` with each dataset row before a rollout.
The docstrings are written from the engine's tool definitions (`env_core.tools`) under the
episode manager's limits, so the model reads the same descriptions as an MCP or OpenEnv agent
(`env_core.contract.chat_tools` is that very schema), and each tool returns the engine's text.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from env_core.episode import Episode
from env_core.factory import shared_manager
from env_core.holder import EpisodeHolder
from env_core.manager import SELECTORS, EpisodeManager
from env_core.tools import TOOLS, ToolSpec, python_parameters, tool_specs


def _docstring(spec: ToolSpec) -> str:
    """The Google-style docstring transformers turns into the tool's JSON schema."""
    args = "".join(f"    {name}: {text}\n" for name, text in spec.arg_descriptions.items())
    return f"{spec.description}\n\nArgs:\n{args}"


NO_EPISODE = "no episode is running; the trainer calls reset first"


class SQLEnvTRL:
    """One rollout's episode. TRL reuses instances across steps; `reset` starts each episode."""

    tools: tuple[ToolSpec, ...] = TOOLS

    def __init__(self, manager: EpisodeManager | None = None) -> None:
        # TRL given the bare class: $SQLENV_DATA_DIR, else the embedded demo.
        manager = manager or shared_manager()
        if manager.tools != self.tools:
            raise ValueError(
                "this manager's row limits change the tools' descriptions: make instances "
                "with environment_factory(manager)"
            )
        # Not owned: a trainer's own code reaches a rollout's episode by its id. An instance
        # dropped with its episode running ends it when garbage-collected.
        self._held = EpisodeHolder(manager, idle=NO_EPISODE, owned=False)

    @property
    def episode(self) -> Episode | None:
        """The engine episode of the current rollout (a property, so TRL does not expose it)."""
        return self._held.episode

    def reset(self, **row: Any) -> str:
        """Start the episode a dataset row names (its `SELECTORS` columns) and return the
        engine's opening text.

        TRL appends the returned text to the prompt's last message with no separator, so
        the prompts built by `training.datasets` end with a blank line. Other columns of the
        row (`prompt`, ...) are ignored. Options that name no question raise the engine's
        error and leave the running episode as it is.
        """
        return self._start(**{name: row[name] for name in SELECTORS if name in row})

    def get_reward(self) -> float:
        """The episode's total reward, as the engine computed it (0 before any reset).

        TRL asks once the rollout is over: an episode left unanswered is ended here with the
        wrong-answer reward (and, in the `potential` profile, the exploration refund).
        """
        return self._held.abandon()

    def _start(self, **selectors: Any) -> str:
        return self._held.start(**selectors).start.text

    def _call(self, tool: str, arguments: dict[str, Any]) -> str:
        return self._held.call(tool, arguments).text


def _tool(spec: ToolSpec) -> Callable[..., str]:
    """The method for one tool. Its signature and docstring declare the tool's parameters,
    which TRL renders as the tool's schema; a call takes whatever arguments the model wrote,
    so that the engine answers wrong or missing ones as every door does, with its error and
    the step spent (as a Python TypeError, TRL would show its own text and charge nothing).
    Positional arguments fill the parameters in order, for callers in Python."""
    properties = spec.parameters["properties"]
    declared = python_parameters(spec)

    def tool(self: SQLEnvTRL, /, *values: Any, **arguments: Any) -> str:
        if len(values) > len(properties):
            raise TypeError(f"{spec.name} takes at most {len(properties)} positional arguments")
        return self._call(spec.name, {**dict(zip(properties, values, strict=False)), **arguments})

    tool.__name__ = tool.__qualname__ = spec.name
    tool.__doc__ = _docstring(spec)
    receiver = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    tool.__signature__ = inspect.Signature([receiver, *declared], return_annotation=str)
    tool.__annotations__ = {p.name: p.annotation for p in declared} | {"return": str}
    return tool


def _with_tools(environment: type[SQLEnvTRL]) -> type[SQLEnvTRL]:
    for spec in environment.tools:
        setattr(environment, spec.name, _tool(spec))
    return environment


_with_tools(SQLEnvTRL)


@functools.cache
def _environment_class(max_rows: int, max_sample_rows: int) -> type[SQLEnvTRL]:
    """SQLEnvTRL with its tools described under other row limits."""
    tools = tool_specs(max_rows, max_sample_rows)
    if tools == SQLEnvTRL.tools:
        return SQLEnvTRL
    return _with_tools(type("SQLEnvTRL", (SQLEnvTRL,), {"tools": tools}))


def tool_methods(environment: SQLEnvTRL) -> list[Callable[..., str]]:
    """The methods `GRPOTrainer` exposes as tools, in the order it lists them in the prompt.

    This is TRL's rule (every public function of the class but `reset` and `get_reward`, in
    `inspect.getmembers` order, i.e. alphabetical); SFT data must render the same list.
    """
    return [
        getattr(environment, name)
        for name, _ in inspect.getmembers(type(environment), inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def episode_reward(environments: list[SQLEnvTRL], **_kwargs: Any) -> list[float]:
    """The engine's episode reward of each rollout, as a TRL reward function.

    `GRPOTrainer` already adds `SQLEnvTRL.get_reward` as a reward column of weight 1; this
    function is for scoring rollouts elsewhere (a custom trainer, an evaluation loop). Passing
    it in `reward_funcs` as well would count the episode reward twice.
    """
    return [environment.get_reward() for environment in environments]


def environment_factory(manager: EpisodeManager) -> Callable[[], SQLEnvTRL]:
    """A zero-argument factory for TRL whose instances share `manager`, their tools described
    under its limits."""
    limits = manager.limits
    return functools.partial(_environment_class(limits.max_rows, limits.max_sample_rows), manager)
