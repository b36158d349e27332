"""Playing one episode through a door and recording it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from env_core.calls import drive
from env_core.catalog import Question
from env_core.episode import ToolResult
from evals.door_clients import DoorClient
from evals.official import official_verdict
from evals.plan import EpisodeTask
from evals.policy import EpisodeContext, Policy


@dataclass(frozen=True)
class StepRecord:
    tool: str
    arguments: dict[str, Any]
    ok: bool
    reward: float
    done: bool
    observation: str
    error: str | None

    @classmethod
    def of(cls, arguments: dict[str, Any], result: ToolResult) -> StepRecord:
        error = None if result.ok else result.data.get("error", "error")
        return cls(
            result.tool, arguments, result.ok, result.reward, result.done, result.text, error
        )


@dataclass(frozen=True)
class EpisodeRecord:
    index: int
    question_id: str
    db_id: str
    hardness: str  # the dataset's difficulty label
    policy: str
    opening: str
    steps: list[StepRecord]
    total_reward: float
    answered: bool
    correct: bool
    notes: dict[str, int] = field(default_factory=dict)
    dataset: str = "spider"
    # The dataset's official metric on the answer, where it differs in kind from `correct`
    # (`evals.official`); None elsewhere.
    official: bool | None = None

    @property
    def steps_used(self) -> int:
        return len(self.steps)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> EpisodeRecord:
        steps = [StepRecord(**step) for step in raw["steps"]]
        return cls(**{**raw, "steps": steps})


def play_episode(door: DoorClient, policy: Policy, task: EpisodeTask, seed: int) -> EpisodeRecord:
    """Play one planned episode of `policy` through `door` and record it."""
    question = door.catalog.question(task.question_id)
    start = door.start(task.question_id)
    max_rows = door.worker_spec().settings.max_rows
    context = EpisodeContext(start, question, task.rng(seed), max_rows=max_rows)
    try:
        # Calls the episode does not take spend no step; the cap keeps a policy that repeats
        # them from looping forever.
        made = drive(
            policy.play(context),
            lambda call: door.step(start.episode_id, call.tool, call.arguments),
            max_calls=2 * start.budget,
        )
    finally:
        door.end(start.episode_id)
    calls = [(call.arguments, result) for call, result in made]
    return record_of(task, question, policy.name, start.text, calls, dict(context.notes))


def record_of(
    task: EpisodeTask,
    question: Question,
    policy: str,
    opening: str,
    calls: Sequence[tuple[dict[str, Any], ToolResult]],
    notes: dict[str, int] | None = None,
) -> EpisodeRecord:
    """The record of a planned episode from its calls' arguments and results."""
    steps = [StepRecord.of(arguments, result) for arguments, result in calls]
    last = calls[-1][1] if calls else None
    answered = last is not None and last.tool == "answer" and last.ok
    answer = calls[-1][0].get("value") if answered else None
    return EpisodeRecord(
        index=task.index,
        question_id=question.id,
        db_id=question.db_id,
        hardness=question.hardness,
        policy=policy,
        opening=opening,
        steps=steps,
        total_reward=round(sum((step.reward for step in steps), 0.0), 6),
        answered=answered,
        correct=answered and last.data.get("correct") is True,
        notes=notes or {},
        dataset=question.dataset,
        official=official_verdict(question, answer),
    )
