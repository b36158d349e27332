"""A2A plumbing both agents share: agent cards, the server application, messages, and a client
for a remote agent.

Built on `a2a-sdk` 0.3, which speaks A2A protocol 0.3.0: the version of the AgentBeats
green-agent template and of the agents written from it (the SDK's 1.x line speaks protocol 1.0,
with other wire types).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from importlib.metadata import version
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.server.agent_execution import AgentExecutor
from a2a.server.apps import A2AStarletteApplication
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    DataPart,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TextPart,
)
from a2a.utils import get_data_parts, get_message_text
from starlette.applications import Starlette

from env_core.command_line import PACKAGE
from env_core.errors import shown

# A participant plays a whole episode before it replies.
REPLY_TIMEOUT_S = 3600.0
# The length of a URL an error message shows.
URL_SHOWN = 120
log = logging.getLogger(__name__)


def agent_card(name: str, description: str, url: str, skill: AgentSkill) -> AgentCard:
    return AgentCard(
        name=name,
        description=description,
        url=url,
        version=version(PACKAGE),
        default_input_modes=["text", "data"],
        default_output_modes=["text", "data"],
        capabilities=AgentCapabilities(streaming=True),
        skills=[skill],
    )


def a2a_app(card: AgentCard, executor: AgentExecutor) -> Starlette:
    """The agent's JSON-RPC endpoint at `/` and its card at `/.well-known/agent-card.json`."""
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore())
    return A2AStarletteApplication(agent_card=card, http_handler=handler).build()


def message(
    text: str,
    data: dict[str, Any] | None = None,
    *,
    role: Role = Role.user,
    context_id: str | None = None,
    task_id: str | None = None,
) -> Message:
    parts = [Part(root=TextPart(text=text))]
    if data is not None:
        parts.append(Part(root=DataPart(data=data)))
    return Message(
        role=role,
        parts=parts,
        message_id=uuid.uuid4().hex,
        context_id=context_id,
        task_id=task_id,
    )


def payload(received: Message) -> dict[str, Any] | str:
    """What a message carries: its first data part, else its text."""
    data = get_data_parts(received.parts)
    return data[0] if data else get_message_text(received)


def reply_text(event: Task | Message) -> str:
    """The text of an agent's last word: a message, or a task's status message and artifacts."""
    if isinstance(event, Message):
        return get_message_text(event)
    texts = [get_message_text(event.status.message)] if event.status.message else []
    for artifact in event.artifacts or ():
        texts += [part.root.text for part in artifact.parts if isinstance(part.root, TextPart)]
    return "\n".join(texts)


class RemoteAgent:
    """An A2A agent at `url`, reached with one HTTP client; `open` reads its card."""

    def __init__(self, url: str, timeout_s: float = REPLY_TIMEOUT_S) -> None:
        self.url = url
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=10.0))
        self.card: AgentCard | None = None
        self._client = None

    async def open(self, streaming: bool = False) -> RemoteAgent:
        try:
            self.card = await A2ACardResolver(self._http, self.url).get_agent_card()
        except Exception as error:
            await self.close()
            # The reason stays in the log: told to whoever named the URL, it would help them
            # map a network they cannot reach themselves.
            log.warning("cannot reach the A2A agent at %s: %s", self.url, error or repr(error))
            raise ConnectionError(
                f"cannot reach the A2A agent at {shown(self.url, URL_SHOWN)}"
            ) from None
        config = ClientConfig(httpx_client=self._http, streaming=streaming)
        self._client = ClientFactory(config).create(self.card)
        return self

    async def events(self, sent: Message) -> AsyncIterator[Task | Message]:
        """Each state of the task the message starts (or the agent's reply message)."""
        async for event in self._client.send_message(sent):
            # The client updates one task object as events arrive: each state is a copy.
            yield event if isinstance(event, Message) else event[0].model_copy(deep=True)

    async def ask(self, sent: Message) -> str:
        """Send a message and wait for the agent's last word; an error if its task did not
        complete."""
        last: Task | Message | None = None
        async for last in self.events(sent):  # noqa: B007 (the last event is the outcome)
            pass
        if last is None:
            raise ConnectionError(f"the A2A agent at {self.url} sent no reply")
        if isinstance(last, Task) and last.status.state != TaskState.completed:
            raise RuntimeError(
                f"the A2A agent at {self.url} ended its task {last.status.state.value}: "
                f"{reply_text(last) or 'no reason given'}"
            )
        return reply_text(last)

    async def close(self) -> None:
        await self._http.aclose()
