"""Running one assessment: plan the episodes, assign each to the assessed agent, score it through
the engine.

The plan is `sqlenv eval`'s (`evals.plan`) for the same seed and count, limited to one pass
over the questions so each is attempted once; each episode's record is built from the engine's
own history of the episode (`evals.play.record_of`), so the summary is the one `sqlenv eval`
gives for the same policy. What the assessed agent says is logged, never scored.

An assessed agent must not try answers to its question anywhere else while it is assessed on it.
It is sent what it needs to play one episode, never the seed or the rest of the plan, so the
question it knows is the one in play: a question is held while an episode plays it, a request
whose plan has a question in play is refused, and an assessment whose next question another
plays waits for that episode to end. The questions an assessment has yet to play stay free for
others (holding a whole plan let one request lock every question for as long as it ran).

An assessment's time is bounded: its episodes times their timeout may be at most
`MAX_ASSESSMENT_S`, plus, for each episode, a wait for another assessment's episode of that
question (itself bounded by its timeout).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Any

from env_core.catalog import Catalog
from env_core.errors import SQLEnvError, UnknownQuestionError, shortened, shown
from env_core.factory import load_catalog, split_names
from env_core.manager import EpisodeManager, executor_limits
from env_core.mixed_catalog import select_questions
from env_core.sandbox import Sandbox
from env_core.settings import Settings
from evals.green.request import AssessmentRequest, RequestError
from evals.metrics import Summary
from evals.plan import EpisodeTask, plan_episodes
from evals.play import EpisodeRecord, record_of
from evals.run_folder import RunFolder
from sqlenv_mcp.assessment import Assessment, Seat, Seats

log = logging.getLogger(__name__)
# What the log keeps of an assessed agent's own words, which may be of any length.
MAX_LOGGED_CHARS = 300
# An assessment's episodes times their timeout: four days, which every question of Spider's dev
# set (1,034) at the default timeout fits in, and 896 questions at an hour each (37 days) not.
MAX_ASSESSMENT_S = 96 * 3600


@dataclass(frozen=True)
class EpisodeBrief:
    """What the assessed agent is sent for one episode: the question and where its tools are,
    nothing more (not the question's id, the seed or the rest of the plan)."""

    question: str
    db_id: str
    tables: tuple[str, ...]
    budget: int
    mcp_url: str

    def text(self) -> str:
        return (
            "Assessment episode.\n"
            f"Question: {self.question}\nDatabase: {self.db_id}\n"
            f"Tables: {', '.join(self.tables)}\nStep budget: {self.budget}\n\n"
            f"Your tools are at the MCP endpoint {self.mcp_url} (streamable HTTP): call "
            "start_episode, explore with describe, sample and query, then call answer once. "
            "Reply when you are done."
        )

    def data(self) -> dict[str, Any]:
        return {**asdict(self), "tables": list(self.tables)}


# Sends the assessed agent one episode's brief; returns its reply.
AssessedAgent = Callable[[EpisodeBrief], Awaitable[str]]
Progress = Callable[[str], Awaitable[None]]

IN_PLAY = (
    "a question of this plan is in an assessment in progress on this green agent; try again "
    "when that assessment ends"
)


class QuestionsInPlay:
    """The questions episodes are playing, each by one at a time, and the assessments running:
    at most `max_assessments` (each holds an episode). Used on the event loop's thread."""

    def __init__(self, max_assessments: int) -> None:
        self.max_assessments = max_assessments
        self._playing: set[str] = set()
        self._freed = asyncio.Condition()
        self._running = 0

    def admit(self, question_ids: Iterable[str]) -> Admission:
        """An assessment of these questions let in; `RequestError` if one is in play, or as
        many assessments as may run are running."""
        if self._running >= self.max_assessments:
            raise RequestError(
                "as many assessments as this green agent runs at once "
                f"({self.max_assessments}, its --max-episodes) are running; try again when "
                "one ends"
            )
        if not self._playing.isdisjoint(question_ids):
            raise RequestError(IN_PLAY)
        self._running += 1
        return Admission(self)

    def leave(self) -> None:
        self._running -= 1

    @asynccontextmanager
    async def playing(self, question_id: str) -> AsyncIterator[None]:
        """The question held for one episode, once no other episode plays it."""
        async with self._freed:
            await self._freed.wait_for(lambda: question_id not in self._playing)
            self._playing.add(question_id)
        try:
            yield
        finally:
            self._playing.discard(question_id)
            async with self._freed:
                self._freed.notify_all()


class Admission:
    """One assessment's place among those running, and the questions it plays: leaving it
    (`with`) gives its place up."""

    def __init__(self, in_play: QuestionsInPlay) -> None:
        self.in_play = in_play

    def __enter__(self) -> Admission:
        return self

    def __exit__(self, *_exception: object) -> None:
        self.in_play.leave()


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

    def to_dict(self, episode_detail: bool) -> dict[str, Any]:
        """The result as the requester gets it: the episodes' records (their question ids and
        verdicts) only with `episode_detail`."""
        result = {"config": self.config, "summary": self.summary.to_dict()}
        if episode_detail:
            result["episodes"] = [record.to_dict() for record in self.records]
        return result


class Assessor:
    """Plans and runs assessments on the data `settings` name; their seats are in `seats`,
    served at `{base_url}/assess/<token>/mcp`."""

    def __init__(self, settings: Settings, seats: Seats, base_url: str) -> None:
        self.settings = settings
        self.seats = seats
        self.base_url = base_url.rstrip("/")
        self._catalogs: dict[str, Catalog] = {}
        self._lock = threading.Lock()
        self._in_play = QuestionsInPlay(settings.max_episodes)
        # Every assessment's SQL runs on these workers: `--sql-workers` in all, however many
        # assessments run at once (the workers end with this process).
        self._sandbox = Sandbox(
            settings.sql_workers, settings.sql_memory_mb, limits=executor_limits(settings)
        )

    def plan(self, request: AssessmentRequest) -> Plan:
        """The episodes a request asks for; `RequestError` if it cannot be met."""
        config = request.config
        changes: dict[str, Any] = {"route_by_episode_id": False}
        if config.split is not None:
            changes["split"] = config.split
        if config.max_steps is not None:
            changes["max_steps"] = config.max_steps
        settings = self.settings.replace(**changes)
        catalog = self._catalog(settings)
        questions = catalog.splits[settings.split].questions
        if config.dataset is not None:
            try:
                questions = select_questions(catalog, settings.split, None, config.dataset)
            except UnknownQuestionError as error:
                raise RequestError(f"config.dataset: {error}") from None
        if not questions:
            others = [name for name in split_names(settings) if name != settings.split]
            raise RequestError(
                f"config.split: split {shown(settings.split)} has no question that can be "
                f"played here; other splits: {', '.join(others) or 'none'}"
            )
        wanted = len(questions) if config.episodes == "all" else config.episodes
        if wanted > len(questions):
            raise RequestError(
                f"config.episodes: {wanted} is more than the {len(questions)} questions of "
                f"split {settings.split}; each question is attempted once per assessment"
            )
        if wanted * config.episode_timeout_s > MAX_ASSESSMENT_S:
            raise RequestError(
                f"config: {wanted} episodes of up to {config.episode_timeout_s:g} s each may "
                f"take over {MAX_ASSESSMENT_S // 3600} hours, this green agent's limit for "
                "an assessment: ask for fewer episodes or a shorter episode_timeout_s"
            )
        return Plan(request, settings, catalog, plan_episodes(questions, wanted, config.seed))

    def admit(self, plan: Plan) -> Admission:
        """The plan let in to run; `RequestError` if another assessment plays one of its
        questions or as many as may run are running."""
        return self._in_play.admit({task.question_id for task in plan.tasks})

    def _catalog(self, settings: Settings) -> Catalog:
        """The catalog of the settings' split; `RequestError` naming the splits there are if it
        cannot be loaded (the reason, which may show the server's paths, is only logged)."""
        with self._lock:
            if settings.split not in self._catalogs:
                try:
                    self._catalogs[settings.split] = load_catalog(settings)
                except SQLEnvError as error:
                    log.warning("split %s cannot be served: %s", settings.split, error)
                    raise RequestError(
                        f"config.split: split {shown(settings.split)} cannot be served; "
                        f"available: {', '.join(split_names(settings)) or 'none'}"
                    ) from None
            return self._catalogs[settings.split]

    async def run(
        self,
        plan: Plan,
        agent: AssessedAgent,
        name: str,
        progress: Progress,
        folder: RunFolder | None = None,
    ) -> AssessmentResult:
        """Play the plan with the assessed agent (called `name` in the records), each question
        held while its episode plays; each record is appended to `folder` as it is made."""
        manager = EpisodeManager(plan.catalog, plan.settings, sandbox=self._sandbox)
        assessment = Assessment(manager, self.seats)
        run_config = {"policy": name, **plan.config}
        if folder is not None:
            await asyncio.to_thread(folder.open, run_config)
        records: list[EpisodeRecord] = []
        try:
            for task in plan.tasks:
                async with self._in_play.playing(task.question_id):
                    seat = assessment.assign(task.question_id)
                    try:
                        record = await self._episode(plan, task, seat, agent, name)
                    finally:
                        assessment.release(seat)
                records.append(record)
                if folder is not None:
                    await asyncio.to_thread(folder.append, record)
                await progress(self._progress_line(plan, records))
        finally:
            manager.shutdown()
        summary = Summary.of(records)
        if folder is not None:
            text = json.dumps(summary.to_dict(), indent=2) + "\n"
            await asyncio.to_thread(folder.summary_file.write_text, text)
        return AssessmentResult(run_config, records, summary)

    def _progress_line(self, plan: Plan, records: list[EpisodeRecord]) -> str:
        """What the requester is told of the episode just recorded: its question and verdict
        only with `--episode-detail`."""
        record, done = records[-1], f"episode {len(records)}/{len(plan.tasks)}"
        if not self.settings.episode_detail:
            return f"{done} played"
        solved = sum(r.correct for r in records)
        return (
            f"{done} ({record.question_id}, {record.hardness}): "
            f"{'correct' if record.correct else 'not correct'}; "
            f"{solved}/{len(records)} correct so far"
        )

    async def _episode(
        self, plan: Plan, task: EpisodeTask, seat: Seat, agent: AssessedAgent, name: str
    ) -> EpisodeRecord:
        start = seat.episode().start
        mcp_url = f"{self.base_url}/assess/{seat.token}/mcp"
        brief = EpisodeBrief(start.question, start.db_id, start.tables, start.budget, mcp_url)
        notes = {}
        try:
            reply = await asyncio.wait_for(agent(brief), plan.request.config.episode_timeout_s)
            log.info("assessed agent on %s: %s", task.question_id, reply[:200])
        except TimeoutError:
            notes["participant_timeouts"] = 1
        except Exception as error:  # the assessed agent failed: its episode is scored as it stands
            reason = shortened(str(error), MAX_LOGGED_CHARS)
            log.warning("assessed agent failed on %s: %s", task.question_id, reason)
            notes["participant_errors"] = 1
        episode = seat.episode()
        calls = [(step.arguments, step.result) for step in episode.history]
        question = plan.catalog.question(task.question_id)
        return record_of(task, question, name, start.text, calls, notes)
