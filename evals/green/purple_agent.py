"""`sqlenv purple`: a reference participant that plays each episode it is sent with a policy.

For each message it reads the episode's brief (a data part: see `EpisodeBrief`), connects to
the episode's MCP tools over streamable HTTP and plays with the policy: an OpenAI-compatible
model through the evaluation harness's chat loop, or, for tests, the random policy or the oracle
(which looks the gold up in its own catalog by the question id it is sent). The random
policy draws from the episode's index and the run's seed, as `sqlenv eval` does, so its results
match.
"""

from __future__ import annotations

import asyncio
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import AgentSkill, Role
from mcp.client.streamable_http import streamable_http_client

from env_core.calls import drive
from env_core.catalog import Catalog
from evals.doors.mcp_door import MCPConnection, episode_start, tool_result
from evals.green import a2a
from evals.plan import EpisodeTask
from evals.policy import EpisodeContext, Policy

SKILL = AgentSkill(
    id="sql-exploration",
    name="SQL exploration",
    description="Answers a question about a SQLite database with a hidden schema, through the "
    "MCP tools (describe, sample, query, answer) at the address it is sent.",
    tags=["sql", "mcp"],
)


def play_brief(brief: dict[str, Any], policy: Policy, catalog: Catalog | None) -> str:
    """Play the episode a brief names; a line on how it went."""
    url = brief["mcp_url"]
    connection = MCPConnection(lambda: streamable_http_client(url), url)
    try:
        start = episode_start(connection.call("start_episode", {}))
        question = catalog.question(brief["question_id"]) if catalog else None
        task = EpisodeTask(brief["index"], brief["question_id"])
        context = EpisodeContext(start, question, task.rng(brief["seed"]))
        made = drive(
            policy.play(context),
            lambda call: tool_result(call.tool, connection.call(call.tool, call.arguments)),
            max_calls=2 * start.budget,
        )
    finally:
        connection.close()
    last = made[-1][1] if made else None
    return f"played {len(made)} calls; last: {last.text.splitlines()[0] if last else 'none'}"


class PurpleExecutor(AgentExecutor):
    def __init__(self, policy: Policy, catalog: Catalog | None) -> None:
        self.policy = policy
        self.catalog = catalog

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        brief = a2a.payload(context.message)
        if not isinstance(brief, dict) or "mcp_url" not in brief:
            text = "send an episode brief: a data part with mcp_url, question_id, index and seed"
        else:
            try:
                text = await asyncio.to_thread(play_brief, brief, self.policy, self.catalog)
            except Exception as error:  # reported to the assessor, which scores the episode
                text = f"could not play the episode: {error}"
        reply = a2a.message(text, role=Role.agent, context_id=context.context_id)
        await event_queue.enqueue_event(reply)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("an episode in play cannot be cancelled")


def purple_app(policy: Policy, catalog: Catalog | None, card_url: str):
    card = a2a.agent_card(
        f"sqlenv purple agent ({policy.name})",
        "A reference participant for sqlenv assessments: plays each episode it is sent.",
        card_url,
        SKILL,
    )
    return a2a.a2a_app(card, PurpleExecutor(policy, catalog))
