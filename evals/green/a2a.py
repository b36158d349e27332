"""A2A plumbing both agents share: agent cards, the server application, messages, and a client
for a remote agent.

Built on `a2a-sdk` 1.x, which speaks A2A protocol 1.0 and, on the same endpoint, 0.3.0: the
version of the AgentBeats green-agent template and of the agents written from it. An agent's card
offers both (`supportedInterfaces` for 1.0 clients, `url` and `protocolVersion` for 0.3 ones);
a remote agent is spoken to in the newest version its card offers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from importlib.metadata import version
from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.helpers import get_data_parts, get_message_text, new_data_part, new_text_part
from a2a.server.agent_execution import AgentExecutor
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    CancelTaskRequest,
    InvalidParamsError,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
    UnsupportedOperationError,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.applications import Starlette

from env_core.command_line import PACKAGE
from env_core.errors import shortened, shown
from evals.green import wire
from serving import asgi
from serving.asgi import App, Receive, Scope, Send

# The protocol versions an agent serves, newest first, all on its one JSON-RPC endpoint.
PROTOCOL_VERSIONS = ("1.0", "0.3")
# An assessed agent plays a whole episode before it replies.
REPLY_TIMEOUT_S = 3600.0
# An agent card is a few kilobytes. Whoever names an assessed agent chooses what its address
# answers: the card is read within these bounds, not whole however large or slow.
MAX_CARD_BYTES = 256 << 10
CARD_TIMEOUT_S = 10.0
# An assessed agent's reply to one episode is a few sentences: each answer it sends (a reply, a
# whole event stream) is read within this bound, not whole however large.
MAX_REPLY_BYTES = 1 << 20
# How long an assessed agent has to take a `tasks/cancel` for its task, once its episode is over.
CANCEL_TIMEOUT_S = 10.0
# A message to an agent is a few kilobytes: an assessment request, an episode's brief, a reply.
MAX_REQUEST_BYTES = 1 << 20
REQUEST_TOO_LARGE = f"a request body may be at most {MAX_REQUEST_BYTES:,} bytes"
FOLLOW_UP = (
    "a message may not name a task: each starts a task of its own (send it without a task id)"
)
NOT_LISTED = "tasks are not listed: ask for a task by its id (GetTask, tasks/get)"
# Tasks an agent keeps for `tasks/get` once they have ended; the oldest go first.
MAX_ENDED_TASKS = 1_000
ENDED = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_CANCELED,
    }
)
# The length of a URL an error message shows.
URL_SHOWN = 120
log = logging.getLogger(__name__)


def agent_card(name: str, description: str, url: str, skill: AgentSkill) -> AgentCard:
    interfaces = [
        AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=protocol)
        for protocol in PROTOCOL_VERSIONS
    ]
    return AgentCard(
        name=name,
        description=description,
        supported_interfaces=interfaces,
        version=version(PACKAGE),
        default_input_modes=["text", "data"],
        default_output_modes=["text", "data"],
        capabilities=AgentCapabilities(streaming=True),
        skills=[skill],
    )


class EndedTasksBounded(InMemoryTaskStore):
    """The SDK's in-memory store, which keeps every task until the process ends (rejected
    requests included), keeping at most `MAX_ENDED_TASKS` of those that have ended: the
    earliest to end go first."""

    def __init__(self) -> None:
        super().__init__()
        # The tasks that have ended, in turn, each with the context it was saved in (the store
        # keeps a task under its requester's name, which the context gives).
        self._ended: dict[str, ServerCallContext] = {}

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await super().save(task, context)
        if task.status.state not in ENDED:
            return
        self._ended[task.id] = context
        while len(self._ended) > MAX_ENDED_TASKS:
            earliest = next(iter(self._ended))
            await self.delete(earliest, self._ended.pop(earliest))


class NewTasksByIdOnly(DefaultRequestHandler):
    """The SDK's handler, with each message starting a task of its own and a task reached by its
    id only.

    A message that names a task is refused before the agent runs: the SDK would run the agent
    again on that task, and the agents read every message as a new request (a second message to
    a running assessment marked its task rejected while the first ran on, unseen, its result
    lost). Tasks are not listed (A2A 1.0's ListTasks): the SDK lists a requester's tasks, and
    with no accounts every requester is one, so each would see all the others' assessments."""

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        _refuse_follow_up(params)
        return await super().on_message_send(params, context)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        _refuse_follow_up(params)
        async for event in super().on_message_send_stream(params, context):
            yield event

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        raise UnsupportedOperationError(message=NOT_LISTED)


def _refuse_follow_up(params: SendMessageRequest) -> None:
    if params.message.task_id:
        raise InvalidParamsError(message=FOLLOW_UP)


def a2a_app(card: AgentCard, executor: AgentExecutor) -> App:
    """The agent's JSON-RPC endpoint at `/`, in each of `PROTOCOL_VERSIONS`, and its card at
    `/.well-known/agent-card.json`. A request body over `MAX_REQUEST_BYTES` is refused (413) as
    it arrives: the SDK checks only a declared length, once it has read the whole body."""
    handler = NewTasksByIdOnly(
        agent_executor=executor, task_store=EndedTasksBounded(), agent_card=card
    )
    routes = create_agent_card_routes(card)
    routes += create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True)
    app = Starlette(routes=routes)

    async def bounded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        body = await asgi.read_body(scope, receive, MAX_REQUEST_BYTES)
        if body is None:
            refusal = asgi.rpc_error(None, asgi.INVALID_REQUEST, REQUEST_TOO_LARGE)
            await asgi.respond_json(send, 413, refusal)
            return
        refusal = wire.refusal(body) if scope["method"] == "POST" else None
        if refusal is not None:
            await asgi.respond_json(send, 400, refusal)
            return
        await app(scope, asgi.replaying(body, receive), send)

    return bounded


def message(
    text: str,
    data: dict[str, Any] | None = None,
    *,
    role: Role = Role.ROLE_USER,
    context_id: str | None = None,
    task_id: str | None = None,
) -> Message:
    parts = [new_text_part(text)]
    if data is not None:
        parts.append(new_data_part(data))
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
    texts = [get_message_text(event.status.message)] if event.status.HasField("message") else []
    for artifact in event.artifacts:
        texts += [part.text for part in artifact.parts if part.HasField("text")]
    return "\n".join(texts)


class RemoteAgent:
    """An A2A agent at `url`, reached with one HTTP client; `open` reads its card. Each answer
    it sends is read within `MAX_REPLY_BYTES`; `headers` go with every request."""

    def __init__(
        self,
        url: str,
        timeout_s: float = REPLY_TIMEOUT_S,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.url = url
        self._http = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=10.0),
            transport=wire.BoundedTransport(MAX_REPLY_BYTES),
        )
        self.card: AgentCard | None = None
        self._client = None

    async def open(self, streaming: bool = False) -> RemoteAgent:
        try:
            self.card = await asyncio.wait_for(self._read_card(), CARD_TIMEOUT_S)
            config = ClientConfig(httpx_client=self._http, streaming=streaming)
            self._client = ClientFactory(config).create(self.card)
        except Exception as error:
            await self.close()
            # The reason stays in the log: told to whoever named the URL, it would help them
            # map a network they cannot reach themselves.
            logged = wire.without_credentials(self.url)
            log.warning("cannot reach the A2A agent at %s: %s", logged, error or repr(error))
            raise ConnectionError(
                f"cannot reach the A2A agent at {shown(self.url, URL_SHOWN)}"
            ) from None
        return self

    async def _read_card(self) -> AgentCard:
        """The card, in either version's layout (a 0.3 card is read as the 1.0 card it means)."""
        card_url = self.url.rstrip("/") + AGENT_CARD_WELL_KNOWN_PATH
        body = bytearray()
        async with self._http.stream("GET", card_url) as response:
            response.raise_for_status()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_CARD_BYTES:
                    raise ValueError(f"its agent card is over {MAX_CARD_BYTES:,} bytes")
        return parse_agent_card(json.loads(body))

    async def events(self, sent: Message) -> AsyncIterator[Task | Message]:
        """Each state of the task the message starts (or the agent's reply message). Left
        before its end (cancelled: a timeout, the caller's own task cancelled), the agent is
        asked to cancel the task it told of."""
        task = Task()
        try:
            async for response in self._client.send_message(SendMessageRequest(message=sent)):
                if response.WhichOneof("payload") == "message":
                    yield response.message
                    return
                _update(task, response)
                state = Task()
                state.CopyFrom(task)
                yield state
        except asyncio.CancelledError:
            if task.id:
                await self._cancel(task.id)
            raise

    async def _cancel(self, task_id: str) -> None:
        try:
            cancelling = self._client.cancel_task(CancelTaskRequest(id=task_id))
            await asyncio.wait_for(cancelling, CANCEL_TIMEOUT_S)
        except Exception as error:  # its task may have ended meanwhile: it is only told
            logged = wire.without_credentials(self.url)
            log.info("the A2A agent at %s did not cancel its task: %s", logged, error)

    async def ask(self, sent: Message) -> str:
        """Send a message and wait for the agent's last word; an error if its task did not
        complete."""
        last: Task | Message | None = None
        async for last in self.events(sent):  # noqa: B007 (the last event is the outcome)
            pass
        if last is None:
            raise ConnectionError(f"the A2A agent at {self.url} sent no reply")
        if isinstance(last, Task) and last.status.state != TaskState.TASK_STATE_COMPLETED:
            raise RuntimeError(
                f"the A2A agent at {self.url} ended its task {state_name(last)}: "
                f"{shortened(reply_text(last), URL_SHOWN) or 'no reason given'}"
            )
        return reply_text(last)

    async def close(self) -> None:
        await self._http.aclose()


def _update(task: Task, response: StreamResponse) -> None:
    """Apply one streamed event to the task it belongs to."""
    kind = response.WhichOneof("payload")
    if kind == "task":
        task.CopyFrom(response.task)
    elif kind == "status_update":
        task.status.CopyFrom(response.status_update.status)
    elif kind == "artifact_update":
        task.artifacts.append(response.artifact_update.artifact)


def state_name(task: Task) -> str:
    """A task's state as A2A 0.3 names it: `completed`, `failed`, ..."""
    return TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower()
