"""`sqlenv purple`: a reference assessed agent that plays each episode it is sent with a policy.

For each message it reads the episode's brief (a data part: see `EpisodeBrief`), connects to
the episode's MCP tools over streamable HTTP and plays with the policy: an OpenAI-compatible
model through the evaluation harness's chat loop, or, for tests, the random policy or the oracle
(which looks the gold up in its own catalog by the question's database and words: it is not
told the question's id). The green agent sends an assessment's episodes as one conversation
(A2A context), so the random policy draws from the agent's seed and the episode's place in its
conversation, as `sqlenv eval` draws from the run's seed and the episode's index: with the
assessment's seed, its results match. It plays only at the MCP addresses its operator allows
(`--allowed-mcp-origin`; loopback addresses by default).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Mapping

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import AgentSkill, Role
from mcp.client.streamable_http import streamable_http_client

from env_core.calls import drive
from env_core.catalog import Catalog, Question
from evals.door_clients.mcp_door import MCPSession, episode_start, tool_result
from evals.green import a2a
from evals.green.origins import AllowedOrigins, Origin
from evals.plan import EpisodeTask
from evals.policy import EpisodeContext, Policy

SKILL = AgentSkill(
    id="sql-exploration",
    name="SQL exploration",
    description="Answers a question about a SQLite database with a hidden schema, through the "
    "MCP tools (describe, sample, query, answer) at the address it is sent.",
    tags=["sql", "mcp"],
)

# The oracle's questions, by database and words.
Known = Mapping[tuple[str, str], Question]


def known_questions(catalog: Catalog, split: str) -> Known:
    return {(question.db_id, question.text): question for question in catalog.questions(split)}


def play_at(mcp_url: str, policy: Policy, known: Known | None, rng: random.Random) -> str:
    """Play the episode whose tools are at `mcp_url`; a line on how it went."""
    session = MCPSession(lambda: streamable_http_client(mcp_url), mcp_url)
    try:
        start = episode_start(session.call("start_episode", {}))
        question = None if known is None else known.get((start.db_id, start.question))
        if known is not None and question is None:
            raise LookupError("the oracle's data has no such question")
        made = drive(
            policy.play(EpisodeContext(start, question, rng)),
            lambda call: tool_result(call.tool, session.call(call.tool, call.arguments)),
            max_calls=2 * start.budget,
        )
    finally:
        session.close()
    last = made[-1][1] if made else None
    return f"played {len(made)} calls; last: {last.text.splitlines()[0] if last else 'none'}"


class PurpleExecutor(AgentExecutor):
    def __init__(
        self, policy: Policy, known: Known | None, seed: int, allowed: AllowedOrigins
    ) -> None:
        self.policy = policy
        self.known = known
        self.seed = seed
        self.allowed = allowed
        self._played: Counter[str] = Counter()  # episodes begun, by conversation

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        brief = a2a.payload(context.message)
        if not isinstance(brief, dict) or not isinstance(brief.get("mcp_url"), str):
            text = "send an episode brief: a data part with mcp_url"
        elif not self.allowed.allow(brief["mcp_url"]):
            text = f"this agent plays only at MCP addresses of {self.allowed}"
        else:
            rng = self._draws(context.context_id)
            try:
                text = await asyncio.to_thread(
                    play_at, brief["mcp_url"], self.policy, self.known, rng
                )
            except Exception as error:  # reported to the assessor, which scores the episode
                text = f"could not play the episode: {error}"
        reply = a2a.message(text, role=Role.ROLE_AGENT, context_id=context.context_id)
        await event_queue.enqueue_event(reply)

    def _draws(self, conversation: str) -> random.Random:
        """What `sqlenv eval` draws from for the episode at this place in a run."""
        index = self._played[conversation]
        self._played[conversation] += 1
        return EpisodeTask(index, question_id="").rng(self.seed)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("an episode in play cannot be cancelled")


def purple_app(
    policy: Policy, known: Known | None, seed: int, card_url: str, origins: tuple[Origin, ...] = ()
):
    card = a2a.agent_card(
        f"sqlenv purple agent ({policy.name})",
        "A reference agent for sqlenv assessments: plays each episode it is sent.",
        card_url,
        SKILL,
    )
    return a2a.a2a_app(card, PurpleExecutor(policy, known, seed, AllowedOrigins(origins)))
