"""One episode: a question, a read-only connection, a step budget and the tool calls made."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from env_core import render
from env_core.answers import AnswerChecker
from env_core.errors import EpisodeFinishedError, InvalidArgumentError, ToolError, error_kind
from env_core.executor import ReadOnlyExecutor
from env_core.rewards import RewardTracker
from env_core.tools import TOOLS_BY_NAME

if TYPE_CHECKING:
    from env_core.catalog import Question
    from env_core.rewards import RewardConfig

MAX_ANSWER_CHARS = 20_000


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call returns: text for language models, `data` for programs."""

    tool: str
    ok: bool
    text: str
    data: dict[str, Any]
    reward: float
    done: bool

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, **self.structured()}

    def structured(self, episode_id: str | None = None) -> dict[str, Any]:
        """The structured form every door sends beside the text."""
        fields = {"episode_id": episode_id} if episode_id is not None else {}
        return {
            **fields,
            "tool": self.tool,
            "ok": self.ok,
            "reward": self.reward,
            "done": self.done,
            "data": self.data,
        }


@dataclass(frozen=True)
class EpisodeStart:
    episode_id: str
    question: str
    db_id: str
    tables: tuple[str, ...]
    budget: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "question": self.question,
            "db_id": self.db_id,
            "tables": list(self.tables),
            "budget": self.budget,
            "text": self.text,
        }


@dataclass(frozen=True, slots=True)
class Step:
    tool: str
    arguments: dict[str, Any]
    result: ToolResult


@dataclass
class Episode:
    """Not created directly: `SessionManager.create` builds episodes."""

    episode_id: str
    question: Question
    executor: ReadOnlyExecutor
    rewards: RewardTracker
    checker: AnswerChecker
    max_steps: int
    history: list[Step] = field(default_factory=list)
    done: bool = False
    correct: bool | None = None
    total_reward: float = 0.0
    last_active: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(
        cls,
        episode_id: str,
        question: Question,
        executor: ReadOnlyExecutor,
        reward_config: RewardConfig,
        checker: AnswerChecker,
        max_steps: int,
    ) -> Episode:
        return cls(episode_id, question, executor, RewardTracker(reward_config), checker, max_steps)

    @property
    def start(self) -> EpisodeStart:
        tables = self.executor.tables
        text = render.start_text(self.question.text, self.question.db_id, tables, self.max_steps)
        return EpisodeStart(
            self.episode_id, self.question.text, self.question.db_id, tables, self.max_steps, text
        )

    @property
    def steps_used(self) -> int:
        return len(self.history)

    @property
    def budget_left(self) -> int:
        return self.max_steps - self.steps_used

    def call(self, tool: str, arguments: Mapping[str, Any] | None = None) -> ToolResult:
        """Make one tool call. Mistakes the agent can fix come back as results with ok=False."""
        arguments = dict(arguments or {})
        with self._lock:
            if self.done:
                raise EpisodeFinishedError(
                    f"episode {self.episode_id} has ended ({self._ending()}); start a new episode"
                )
            result = self._run(tool, arguments)
            self.history.append(Step(tool, arguments, result))
            self.total_reward = round(self.total_reward + result.reward, 6)
            return result

    def abandon(self) -> float:
        """End an unfinished episode without an answer, booking the wrong-answer terminal
        reward (and, in the `potential` profile, the exploration refund); returns that reward.
        Nothing happens to an episode that has already ended."""
        with self._lock:
            if self.done:
                return 0.0
            reward = round(self.rewards.terminal(correct=False), 6)
            self.done = True
            self.total_reward = round(self.total_reward + reward, 6)
            return reward

    def close(self) -> None:
        self.executor.close()

    def _ending(self) -> str:
        if self.correct is not None:
            return "was answered"
        return "ran out of steps" if self.budget_left == 0 else "was abandoned"

    def _run(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        call_key = repr(sorted(arguments.items()))
        try:
            _check_arguments(tool, arguments)
            if tool == "answer":
                return self._answer(arguments["value"])
            text, data, table = self._explore(tool, arguments)
        except ToolError as error:
            text = f"Error: {error}"
            data = {"error": error_kind(error), "message": str(error)}
            return self._finish_step(tool, False, text, data, call_key, None)
        return self._finish_step(tool, True, text, data, call_key, table)

    def _explore(self, tool: str, arguments: dict[str, Any]) -> tuple[str, dict, str | None]:
        if tool == "describe":
            schema = self.executor.describe(arguments["table"])
            return render.schema_text(schema), render.schema_data(schema), schema.name
        if tool == "sample":
            table = self.executor.resolve_table(arguments["table"])
            result = self.executor.sample(table, arguments.get("n", 5))
            return render.rows_text(result), render.rows_data(result), table
        result = self.executor.query(arguments["sql"])
        return render.rows_text(result), render.rows_data(result), None

    def _finish_step(
        self, tool: str, ok: bool, text: str, data: dict, call_key: str, table: str | None
    ) -> ToolResult:
        reward = self.rewards.step(tool, call_key, ok, table)
        done = self.steps_used + 1 >= self.max_steps
        if done:
            reward += self.rewards.terminal(correct=False)
            self.done = True
            text += "\nOut of steps: the episode is over without an answer."
        else:
            left = self.max_steps - self.steps_used - 1
            text += f"\n[{left} step{'' if left == 1 else 's'} left]"
        return ToolResult(tool, ok, text, data, round(reward, 6), done)

    def _answer(self, value: Any) -> ToolResult:
        if isinstance(value, str) and len(value) > MAX_ANSWER_CHARS:
            raise InvalidArgumentError(
                f"the answer is {len(value)} characters; the limit is {MAX_ANSWER_CHARS}"
            )
        verdict = self.checker.check(self.question.gold, value)
        self.correct = verdict.correct
        self.done = True
        reward = round(self.rewards.terminal(verdict.correct), 6)
        text = f"{'Correct' if verdict.correct else 'Incorrect'}. The episode is over."
        return ToolResult("answer", True, text, {"correct": verdict.correct}, reward, True)


def _check_arguments(tool: str, arguments: dict[str, Any]) -> None:
    spec = TOOLS_BY_NAME.get(tool)
    if spec is None:
        raise InvalidArgumentError(f"unknown tool {tool!r}; tools are: {', '.join(TOOLS_BY_NAME)}")
    properties = spec.parameters["properties"]
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        raise InvalidArgumentError(
            f"{tool} does not take {', '.join(unknown)}; it takes: {', '.join(properties)}"
        )
    missing = [name for name in spec.parameters["required"] if name not in arguments]
    if missing:
        raise InvalidArgumentError(f"{tool} needs {', '.join(missing)}")
    for name, value in arguments.items():
        expected = properties[name]["type"]
        if expected == "string" and tool != "answer" and not isinstance(value, str):
            raise InvalidArgumentError(f"{tool}: {name} must be a string")
        if expected == "integer":
            low, high = properties[name]["minimum"], properties[name]["maximum"]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidArgumentError(
                    f"{tool}: {name} must be a whole number from {low} to {high}"
                )
