"""`sqlenv green`: the green agent's A2A server, with the assigned episodes' MCP tools beside it.

One process serves the agent card (`/.well-known/agent-card.json`), the A2A endpoint (`/`) and,
at `/assess/<token>/mcp`, the tools of each episode an assessment has assigned.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from pathlib import Path

from a2a.helpers import new_data_part, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import (
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    Role,
    SecurityScheme,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH

from env_core.errors import shown
from env_core.manager import executor_limits
from env_core.settings import Settings
from env_core.tools import tools_for
from evals.green import a2a, wire
from evals.green.assessor import AssessmentResult, Assessor, EpisodeBrief, Plan
from evals.green.request import RequestError, parse_request
from evals.report import summary_rows, text_table
from evals.run_folder import Run, RunFolder
from serving.asgi import App, Receive, Scope, Send
from sqlenv_mcp.assessment import Seats, routed_seat
from sqlenv_mcp.server import BearerAuth, HttpSettings, build_assessment_server, http_app

log = logging.getLogger(__name__)

SKILL = AgentSkill(
    id="sql-exploration-assessment",
    name="SQL exploration assessment",
    description="Assess an agent on questions about SQLite databases whose schema is hidden: "
    "for each episode it gets the question and the address of MCP tools (describe, sample, "
    "query, answer) and is scored by the engine on its one answer. Returns per-episode records "
    "and the success rate with a Wilson interval, mean reward and steps, per hardness.",
    tags=["sql", "text-to-sql", "exploration", "mcp", "benchmark"],
    examples=[
        '{"participants": {"agent": "http://127.0.0.1:9019/"}, '
        '"config": {"episodes": 20, "seed": 0, "split": "dev", "max_steps": 15}}'
    ],
)


UNREADABLE = "the request could not be read as an assessment request"
FAILED = "the assessment failed on the green agent's side; its log says why"


class GreenExecutor(AgentExecutor):
    def __init__(self, assessor: Assessor) -> None:
        self.assessor = assessor

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)

        def said(text: str) -> Message:
            return a2a.message(
                text, role=Role.ROLE_AGENT, context_id=task.context_id, task_id=task.id
            )

        try:
            request = parse_request(a2a.payload(context.message))
            plan = await asyncio.to_thread(self.assessor.plan, request)  # may load a catalog
            admission = self.assessor.admit(plan)
        except RequestError as error:
            await updater.reject(said(str(error)))
            return
        except Exception:  # no task may be left unended: its requester would wait for good
            log.exception("an assessment request could not be read")
            await updater.reject(said(UNREADABLE))
            return
        with admission:
            await self._assess(plan, updater, said)

    async def _assess(
        self, plan: Plan, updater: TaskUpdater, said: Callable[[str], Message]
    ) -> None:
        agent_url = plan.request.assessed_agent
        logged_url = wire.without_credentials(agent_url)
        await updater.start_work(said(f"assessing {logged_url}: {len(plan.tasks)} episodes"))
        agent = a2a.RemoteAgent(agent_url)
        # One conversation with the assessed agent per assessment: its episodes are its messages.
        conversation = uuid.uuid4().hex
        runs_dir = self.assessor.settings.runs_dir
        folder = RunFolder(Path(runs_dir) / updater.task_id) if runs_dir else None
        try:
            # Streamed, the assessed agent's task is known from its start: it can be cancelled.
            await agent.open(streaming=True)

            async def play(brief: EpisodeBrief) -> str:
                sent = a2a.message(brief.text(), brief.data(), context_id=conversation)
                return await agent.ask(sent)

            async def progress(line: str) -> None:
                await updater.update_status(TaskState.TASK_STATE_WORKING, said(line))

            name = agent.card.name
            result = await self.assessor.run(plan, play, name, progress, folder)
        except ConnectionError as error:
            await updater.failed(said(str(error)))
            return
        except Exception:  # as above: the task ends, the requester is told
            log.exception("an assessment of %s failed", shown(logged_url, a2a.URL_SHOWN))
            await updater.failed(said(FAILED))
            return
        finally:
            await agent.close()
        data = result.to_dict(self.assessor.settings.episode_detail)
        parts = [new_text_part(summary_text(result)), new_data_part(data)]
        await updater.add_artifact(parts, name="Result")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def summary_text(result: AssessmentResult) -> str:
    run = Run(result.config["policy"], result.config, result.summary, result.records)
    return text_table(*summary_rows([run]))


def green_app(settings: Settings, card_url: str, allowed_hosts: tuple[str, ...] = ()) -> App:
    """The green agent's application: A2A at `/`, the assigned episodes under `/assess/`."""
    seats = Seats()
    http = HttpSettings(settings, allowed_hosts)
    tools = tools_for(executor_limits(settings))
    mcp = build_assessment_server(seats, tools, routed_seat(seats), http)
    episodes = http_app(mcp, http, None, seats=seats)
    card = a2a.agent_card(
        "sqlenv green agent",
        "Assesses agents on SQL exploration: questions about hidden-schema SQLite databases, "
        "answered with MCP tools, scored by the sqlenv engine.",
        card_url,
        SKILL,
    )
    token = settings.assessment_token
    if token:
        bearer = HTTPAuthSecurityScheme(scheme="bearer")
        card.security_schemes["bearer"].CopyFrom(SecurityScheme(http_auth_security_scheme=bearer))
        card.security_requirements.add().schemes["bearer"].SetInParent()
    agent = a2a.a2a_app(card, GreenExecutor(Assessor(settings, seats, card_url)))
    if token:  # the card stays public: it tells a client to bring the token
        agent = BearerAuth(agent, token, public=(AGENT_CARD_WELL_KNOWN_PATH,))

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        # The episodes' app runs the MCP sessions' lifespan; the A2A app needs none.
        if scope["type"] == "lifespan" or scope.get("path", "").startswith("/assess/"):
            await episodes(scope, receive, send)
        else:
            await agent(scope, receive, send)

    return route
