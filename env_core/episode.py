"""One episode: a question, a read-only connection, a step budget and the tool calls made."""

from __future__ import annotations

import functools
import hashlib
import reprlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from env_core import render
from env_core.answers import AnswerChecker
from env_core.errors import (
    CallCancelledError,
    EpisodeBusyError,
    EpisodeError,
    EpisodeFinishedError,
    InvalidArgumentError,
    SQLEnvError,
    ToolError,
    UnknownToolError,
    encodable,
    ends_episode,
    error_data,
    error_kinds,
    shortened,
    shown,
)
from env_core.executor import ReadOnlyExecutor
from env_core.rewards import RewardTracker, booked
from env_core.sandbox import Work, finish
from env_core.tools import Target, ToolSpec, call_forms, check_arguments, specs_by_name, tool_table

if TYPE_CHECKING:
    from env_core.catalog import Question
    from env_core.layouts import ColumnNotes
    from env_core.rewards import RewardConfig

MAX_ANSWER_CHARS = 20_000
# A refused call names its tool as sent, cut short and escaped: it may be any text.
MAX_REFUSED_NAME_CHARS = 64
# A failed call's arguments are kept (in its step and the repeat check) cut to this size: a
# client may send megabytes that the call refuses, and the episode would hold them to its end.
MAX_KEPT_ARGUMENT_CHARS = 1_000
# A call may carry any number of arguments its tool does not take.
MAX_KEPT_ARGUMENTS = 8
_KEPT_REPR = reprlib.Repr()  # nested values: a bounded text, however deep or large
_KEPT_REPR.maxstring = _KEPT_REPR.maxother = MAX_KEPT_ARGUMENT_CHARS // 10
REFUSAL_KINDS = frozenset(error_kinds(EpisodeError))


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call returns: text for language models, `data` for programs."""

    tool: str
    ok: bool
    text: str
    data: dict[str, Any]
    reward: float
    done: bool

    @property
    def refused(self) -> bool:
        """Whether the episode did not take the call (see `refusal`)."""
        return not self.ok and self.data.get("error") in REFUSAL_KINDS

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


def refusal(tool: str, error: SQLEnvError) -> ToolResult:
    """The result of a call the episode did not take (unknown or finished episode, unknown
    tool, another call running): no step spent, no reward, and done when the episode can take
    no more calls. Every door answers such a call with it."""
    return ToolResult(
        encodable(shortened(tool, MAX_REFUSED_NAME_CHARS)),
        False,
        render.error_text(error),
        error_data(error),
        0.0,
        ends_episode(error),
    )


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
    """Not created directly: `EpisodeManager.create` builds episodes."""

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
    owner: str | None = None
    client: str | None = None
    key: tuple[str | None, str] = (None, "")  # as the manager registers it
    _busy: bool = field(default=False, repr=False)
    # What the dataset says of each column (BIRD's descriptions), shown by describe.
    column_notes: ColumnNotes = field(default_factory=dict, repr=False)
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
        column_notes: ColumnNotes | None = None,
    ) -> Episode:
        tracker = RewardTracker(reward_config)
        notes = column_notes or {}
        return cls(episode_id, question, executor, tracker, checker, max_steps, column_notes=notes)

    @property
    def start(self) -> EpisodeStart:
        tables = self.executor.tables
        question = self.question
        tools = call_forms(tool_table(*self._limits))
        text = render.start_text(
            question.text, question.db_id, tables, self.max_steps, tools, question.evidence
        )
        # The tables its text lists: a database may have more than the text can hold.
        shown = tables[: render.tables_shown(tables)]
        return EpisodeStart(
            self.episode_id, self.question.text, self.question.db_id, shown, self.max_steps, text
        )

    @property
    def steps_used(self) -> int:
        return len(self.history)

    @property
    def budget_left(self) -> int:
        return self.max_steps - self.steps_used

    def call(self, tool: str, arguments: Mapping[str, Any] | None = None) -> ToolResult:
        """Make one tool call. Mistakes the agent can fix come back as results with ok=False."""
        return finish(self.work(tool, arguments))

    def work(self, tool: str, arguments: Mapping[str, Any] | None = None) -> Work[ToolResult]:
        """One tool call as a generator of sandbox calls (see `env_core.sandbox`).

        One call at a time: a call made while another is running is refused, unspent, as are
        calls after the end and calls of an unknown tool (`EpisodeError`; see `refusal`).
        """
        arguments = dict(arguments or {})
        with self._lock:
            if self.done:
                raise EpisodeFinishedError(
                    f"episode {self.episode_id} has ended ({self.ending}); start a new episode"
                )
            spec = self._tools.get(tool)
            if spec is None:
                raise UnknownToolError(
                    f"unknown tool {shown(tool)}; tools are: {', '.join(self._tools)}"
                )
            if self._busy:
                raise EpisodeBusyError(
                    f"episode {self.episode_id} is still running a call; "
                    "make the next call when that one has returned"
                )
            self._busy = True
        try:
            try:
                check_arguments(spec, arguments)
                if spec.handler is None:
                    return self._answer(arguments)
                explored = yield from spec.handler(self._target, arguments)
            except ToolError as error:
                return self._failed(tool, error, arguments)
            except GeneratorExit:
                # The caller gave up while the call ran (a cancel, a dropped connection): it
                # is spent like a failed call, or cancelling would be a free probe.
                self._failed(tool, CallCancelledError.spent(), arguments)
                raise
            return self._finish_step(
                tool, True, explored.text, explored.data, arguments, explored.table
            )
        finally:
            self._busy = False

    @property
    def closing_total(self) -> float:
        """The total reward the episode ends with if it ends now: its total once ended, else
        with the reward `abandon` would book."""
        with self._lock:
            if self.done:
                return self.total_reward
            return booked(self.total_reward, round(self.rewards.terminal(False, book=False), 6))

    def abandon(self) -> float:
        """End an unfinished episode without an answer, booking the wrong-answer terminal
        reward (and, in the `potential` profile, the exploration refund); returns that reward.
        Nothing happens to an episode that has already ended."""
        with self._lock:
            if self.done:
                return 0.0
            reward = round(self.rewards.terminal(correct=False), 6)
            self.done = True
            self.total_reward = booked(self.total_reward, reward)
            return reward

    def close(self) -> None:
        self.executor.close()

    @property
    def _limits(self) -> tuple[int, int]:
        """The row limits the tools are described under: its executor's."""
        return self.executor.limits.max_rows, self.executor.limits.max_sample_rows

    @functools.cached_property
    def _target(self) -> Target:
        """What this episode's calls explore (the same for all of them)."""
        return Target(self.executor, self.client, self.column_notes)

    @functools.cached_property
    def _tools(self) -> dict[str, ToolSpec]:
        """The tools as this episode's agent reads them: under its executor's limits."""
        return specs_by_name(*self._limits)

    @property
    def ending(self) -> str:
        """How an episode that has ended ended, as its refusals say it."""
        if self.correct is not None:
            return "was answered"
        return "ran out of steps" if self.budget_left == 0 else "was abandoned"

    def _failed(self, tool: str, error: ToolError, arguments: dict[str, Any]) -> ToolResult:
        text, data = render.error_text(error), error_data(error)
        return self._finish_step(tool, False, text, data, kept_arguments(arguments), None)

    def _finish_step(
        self, tool: str, ok: bool, text: str, data: dict, arguments: dict, table: str | None
    ) -> ToolResult:
        """Reward and book a step the episode took; its result."""
        with self._lock:
            if self.done:
                return self._ended_meanwhile(tool)
            reward = self.rewards.step(tool, repr(sorted(arguments.items())), ok, table)
            left = self.max_steps - len(self.history) - 1
            if left > 0:
                text += f"\n[{left} step{'' if left == 1 else 's'} left]"
            else:
                reward += self.rewards.terminal(correct=False)
                self.done = True
                text += "\nOut of steps: the episode is over without an answer."
            result = ToolResult(tool, ok, text, data, round(reward, 6), left <= 0)
            self._book(tool, arguments, result)
        return result

    def _ended_meanwhile(self, tool: str) -> ToolResult:
        """The result of a call the episode was ended during (`abandon`): refused, and nothing
        booked, so the total read at the end stays the episode's total."""
        error = EpisodeFinishedError(
            f"episode {self.episode_id} {self.ending} while this call ran; start a new episode"
        )
        return refusal(tool, error)

    def _book(self, tool: str, arguments: dict[str, Any], result: ToolResult) -> None:
        """Keep a step the episode took; the caller holds the lock."""
        self.history.append(Step(tool, arguments, result))
        self.total_reward = booked(self.total_reward, result.reward)

    def _answer(self, arguments: dict[str, Any]) -> ToolResult:
        value = arguments["value"]
        if isinstance(value, str) and len(value) > MAX_ANSWER_CHARS:
            raise InvalidArgumentError(
                f"the answer is {len(value)} characters; the limit is {MAX_ANSWER_CHARS}"
            )
        verdicts = [self.checker.check(gold, value) for gold in self.question.golds]
        verdict = next((v for v in verdicts if v.correct), verdicts[0])
        text = f"{'Correct' if verdict.correct else 'Incorrect'}. The episode is over."
        with self._lock:
            if self.done:
                return self._ended_meanwhile("answer")
            self.correct = verdict.correct
            self.done = True
            reward = round(self.rewards.terminal(verdict.correct), 6)
            result = ToolResult("answer", True, text, {"correct": verdict.correct}, reward, True)
            self._book("answer", arguments, result)
        return result


def kept_arguments(arguments: Mapping[Any, Any]) -> dict[Any, Any]:
    """A failed call's arguments as its episode keeps them: the first
    `MAX_KEPT_ARGUMENTS`, and the rest as one entry saying how many with a digest; text over
    `MAX_KEPT_ARGUMENT_CHARS` cut short with its length and a digest (different calls stay
    different for the repeat check); other values that are not numbers described in a
    bounded text."""
    items = list(arguments.items())
    kept = {_kept(name): _kept(value) for name, value in items[:MAX_KEPT_ARGUMENTS]}
    if rest := items[MAX_KEPT_ARGUMENTS:]:
        kept["..."] = f"{len(rest):,} more arguments ({_digest(repr(rest))})"
    return kept


def _kept(value: Any) -> Any:
    if isinstance(value, str):
        if len(value) <= MAX_KEPT_ARGUMENT_CHARS:
            return value
        return f"{value[:MAX_KEPT_ARGUMENT_CHARS]}... ({len(value)} characters, {_digest(value)})"
    if value is None or isinstance(value, bool | int | float):
        return value
    return _KEPT_REPR.repr(value)


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(errors="surrogatepass"), digest_size=8).hexdigest()
