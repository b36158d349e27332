"""Running one assessment: plan the episodes, assign each to the participant, score it through
the engine.

The plan is `sqlenv eval`'s (`evals.plan`) for the same seed and count, limited to one pass
over the questions so each is attempted once; each episode's record is built from the engine's
own history of the episode (`evals.play.record_of`), so the summary is the one `sqlenv eval`
gives for the same policy. What the participant says is logged, never scored.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from env_core.catalog import Catalog
from env_core.errors import SQLEnvError
from env_core.factory import load_catalog
from env_core.sessions import SessionConfig, SessionManager
from env_core.settings import Settings
from evals.green.request import AssessmentRequest, RequestError
from evals.metrics import Summary
from evals.plan import EpisodeTask, plan_episodes
from evals.play import EpisodeRecord, record_of
from sqlenv_mcp.assessment import Assessment, Seat, Seats

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EpisodeBrief:
    """What the participant is sent for one episode: the question and where its tools are.
    The episode's index and the run's seed let a reference player draw what `sqlenv eval`
    draws for that episode."""

    index: int
    episodes: int
    question_id: str
    question: str
    db_id: str
    tables: tuple[str, ...]
    budget: int
    mcp_url: str
    seed: int

    def text(self) -> str:
        return (
            f"Assessment episode {self.index + 1} of {self.episodes}.\n"
            f"Question: {self.question}\nDatabase: {self.db_id}\n"
            f"Tables: {', '.join(self.tables)}\nStep budget: {self.budget}\n\n"
            f"Your tools are at the MCP endpoint {self.mcp_url} (streamable HTTP): call "
            "start_episode, explore with describe, sample and query, then call answer once. "
            "Reply when you are done."
        )

    def data(self) -> dict[str, Any]:
        return {**asdict(self), "tables": list(self.tables)}


# Sends the participant one episode's brief; returns its reply.
Participant = Callable[[EpisodeBrief], Awaitable[str]]
Progress = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class Plan:
    request: AssessmentRequest
    settings: Settings
    catalog: Catalog
    tasks: list[EpisodeTask]

    @property
    def config(self) -> dict[str, Any]:
        """The run's description, as `sqlenv eval` writes it in run.json."""
        settings = self.settings
        return {
            "door": "a2a",
            "split": settings.split,
            "seed": self.request.config.seed,
            "episodes": len(self.tasks),
            "data_dir": settings.data_dir,
            "max_steps": settings.max_steps,
            "reward_profile": settings.reward_profile,
        }


@dataclass(frozen=True)
class AssessmentResult:
    config: dict[str, Any]
    records: list[EpisodeRecord]
    summary: Summary

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "summary": self.summary.to_dict(),
            "episodes": [record.to_dict() for record in self.records],
        }


class Assessor:
    """Plans and runs assessments on the data `settings` name; their seats are in `seats`,
    served at `{base_url}/assess/<token>/mcp`."""

    def __init__(self, settings: Settings, seats: Seats, base_url: str) -> None:
        self.settings = settings
        self.seats = seats
        self.base_url = base_url.rstrip("/")
        self._catalogs: dict[str, Catalog] = {}
        self._lock = threading.Lock()

    def plan(self, request: AssessmentRequest) -> Plan:
        """The episodes a request asks for; `RequestError` if it cannot be met."""
        config = request.config
        changes: dict[str, Any] = {"route_by_episode_id": False}
        if config.split is not None:
            changes["split"] = config.split
        if config.max_steps is not None:
            changes["max_steps"] = config.max_steps
        settings = self.settings.replace(**changes)
        try:
            catalog = self._catalog(settings)
        except SQLEnvError as error:
            raise RequestError(f"config.split: {error}") from None
        questions = catalog.questions(settings.split)
        wanted = len(questions) if config.episodes == "all" else config.episodes
        if wanted > len(questions):
            raise RequestError(
                f"config.episodes: {wanted} is more than the {len(questions)} questions of "
                f"split {settings.split}; each question is attempted once per assessment"
            )
        return Plan(request, settings, catalog, plan_episodes(questions, wanted, config.seed))

    def _catalog(self, settings: Settings) -> Catalog:
        with self._lock:
            if settings.split not in self._catalogs:
                self._catalogs[settings.split] = load_catalog(settings)
            return self._catalogs[settings.split]

    async def run(
        self, plan: Plan, participant: Participant, name: str, progress: Progress
    ) -> AssessmentResult:
        """Play the plan with the participant (called `name` in the records)."""
        manager = SessionManager(plan.catalog, SessionConfig.of(plan.settings))
        assessment = Assessment(manager, self.seats)
        records: list[EpisodeRecord] = []
        try:
            for task in plan.tasks:
                seat = assessment.assign(task.question_id)
                try:
                    record = await self._episode(plan, task, seat, participant, name)
                finally:
                    assessment.release(seat)
                records.append(record)
                solved = sum(r.correct for r in records)
                await progress(
                    f"episode {task.index + 1}/{len(plan.tasks)} ({record.question_id}, "
                    f"{record.hardness}): {'correct' if record.correct else 'not correct'}; "
                    f"{solved}/{len(records)} correct so far"
                )
        finally:
            manager.shutdown()
        return AssessmentResult({"policy": name, **plan.config}, records, Summary.of(records))

    async def _episode(
        self, plan: Plan, task: EpisodeTask, seat: Seat, participant: Participant, name: str
    ) -> EpisodeRecord:
        start = seat.episode().start
        brief = EpisodeBrief(
            task.index,
            len(plan.tasks),
            task.question_id,
            start.question,
            start.db_id,
            start.tables,
            start.budget,
            f"{self.base_url}/assess/{seat.token}/mcp",
            plan.request.config.seed,
        )
        notes = {}
        try:
            reply = await asyncio.wait_for(
                participant(brief), plan.request.config.episode_timeout_s
            )
            log.info("participant on %s: %s", task.question_id, reply[:200])
        except TimeoutError:
            notes["participant_timeouts"] = 1
        except Exception as error:  # the participant failed: its episode is scored as it stands
            log.warning("participant failed on %s: %s", task.question_id, error)
            notes["participant_errors"] = 1
        episode = seat.episode()
        calls = [(step.arguments, step.result) for step in episode.history]
        question = plan.catalog.question(task.question_id)
        return record_of(task, question, name, start.text, calls, notes)
