"""Fair use of the OpenEnv server, in front of OpenEnv's own application.

- Request bodies are limited (413) before any of them is parsed.
- One client (remote address) holds at most `per_client` sessions: WebSocket sessions, and
  OpenEnv sessions created over HTTP (`openenv/session/create` on `POST /mcp`).
- A session created over HTTP holds no capacity for long unless a WebSocket attaches to it
  (`/ws?session_id=...`): once idle for `idle_unattached_s` it is closed with the request a
  client sends to close it (`openenv/session/close`).
- A WebSocket frame that cannot be a message (binary, JSON that is not an object, or beyond
  `serving.json_limits`: nested too deep, too many values, a number too long to read) gets an
  error frame and the session goes on; OpenEnv would end the session, or keep a frame of
  340,000 values parsed (~25 MiB) while its socket idles. A JSON-RPC request over HTTP beyond
  those bounds gets a parse error.
- Errors repeat at most an excerpt of the input (`echoes`): a JSON-RPC request whose id is too
  long to send back is refused, and OpenEnv's error frames and JSON-RPC errors are cut short.
- A session id is no bearer capability: a session created over HTTP is used, attached to or
  closed only by the client that created it; any other session id (another client's, or one
  of a WebSocket's own session) is answered as OpenEnv answers an unknown one.
- A client that leaves while a call runs ends its socket quietly: OpenEnv's failure to send
  it the outcome is no error of the server's, and is not logged as one.
- `CONNECTION_CLIENT` tells the environment the client of the connection it serves.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

from doors.openenv.echoes import ECHOING_FRAMES, briefed_frame, briefing_json_rpc
from env_core.errors import encodable
from serving import asgi, json_limits
from serving.asgi import App, Message, Receive, Scope, Send

GUARDED_SOCKETS = ("/ws", "/mcp")
MAX_ID_CHARS = 128
NOT_A_MESSAGE = (
    "a message must be a JSON object with a 'type' (reset, step, state, close or mcp), sent as a "
    "text frame"
)
ID_TOO_LONG = f"a request id may be at most {MAX_ID_CHARS} characters long"
ID_NOT_TEXT = "a request id must be valid Unicode text (it holds a lone surrogate)"
SESSION_ID_NOT_TEXT = "params.session_id must be a string"

# The remote address of the connection a request or WebSocket came on (see `asgi.client_of`).
# OpenEnv builds each session's environment with a factory that takes no arguments, and awaits
# its `reset_async` in the connection's own task, where the guard has set this.
CONNECTION_CLIENT: ContextVar[str | None] = ContextVar("connection_client", default=None)


@dataclass
class _Session:
    client: str
    last_active: float
    attached: bool = False


class RequestGuard:
    def __init__(
        self,
        app: App,
        *,
        max_body_bytes: int,
        per_client: int,
        idle_unattached_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.per_client = per_client
        self.idle_unattached_s = idle_unattached_s
        self.clock = clock
        self._sockets: Counter[str] = Counter()
        self._sessions: dict[str, _Session] = {}  # created over HTTP

    def sessions(self, client: str) -> int:
        unattached = sum(s.client == client and not s.attached for s in self._sessions.values())
        return self._sockets[client] + unattached

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            interval = max(self.idle_unattached_s / 4, 0.5)
            await self.app(scope, asgi.sweeping_while_running(receive, self.sweep, interval), send)
        elif scope["type"] == "websocket":
            CONNECTION_CLIENT.set(asgi.client_of(scope))
            await self._socket(scope, receive, send)
        elif scope["type"] == "http":
            CONNECTION_CLIENT.set(asgi.client_of(scope))
            await self._request(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    # --- HTTP ---------------------------------------------------------------------------

    async def _request(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await asgi.read_body(scope, receive, self.max_body_bytes)
        if body is None:
            detail = f"the request body is over the limit of {self.max_body_bytes} bytes"
            await asgi.respond_json(send, 413, {"detail": detail})
            return
        replay = asgi.replaying(body, receive)
        if scope["path"] == "/mcp" and scope["method"] == "POST":
            await self._json_rpc(scope, body, replay, send)
        else:
            await self.app(scope, replay, send)

    async def _json_rpc(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        send = briefing_json_rpc(send)
        try:
            request = json_limits.read(body)
        except json_limits.Unreadable as why:
            await asgi.respond_json(send, 200, asgi.rpc_error(None, asgi.PARSE_ERROR, str(why)))
            return
        except ValueError:
            request = None
        if not isinstance(request, dict):
            await self.app(scope, receive, send)  # OpenEnv answers with its parse error
            return
        problem = _request_problem(request)
        if problem is not None:
            await asgi.respond_json(send, 200, asgi.rpc_error(None, asgi.INVALID_REQUEST, problem))
            return
        method, params = request.get("method"), request.get("params")
        session_id = params.get("session_id") if isinstance(params, dict) else None
        if isinstance(session_id, str) and session_id:
            session = self._own_session(session_id, scope)
            if session is None:
                message = _unknown(session_id)
                unknown = asgi.rpc_error(request.get("id"), asgi.INVALID_PARAMS, message)
                await asgi.respond_json(send, 200, unknown)
                return
            session.last_active = self.clock()
        if method == "openenv/session/create":
            await self._create(scope, receive, send, request.get("id"))
            return
        await self.app(scope, receive, send)
        if method == "openenv/session/close" and isinstance(session_id, str):
            self._sessions.pop(session_id, None)

    def _own_session(self, session_id: str, scope: Scope) -> _Session | None:
        """The session created over HTTP by the client of this request, or None: a session id
        is no bearer capability, and another client's is answered as unknown."""
        session = self._sessions.get(session_id)
        if session is None or session.client != asgi.client_of(scope):
            return None
        return session

    async def _create(self, scope: Scope, receive: Receive, send: Send, request_id: object) -> None:
        client = asgi.client_of(scope)
        await self.sweep()
        if self.sessions(client) >= self.per_client:
            refusal = asgi.rpc_error(request_id, asgi.SERVER_ERROR, self._over_limit_message())
            await asgi.respond_json(send, 200, refusal)
            return
        chunks: list[bytes] = []

        async def learn(message: Message) -> None:
            if message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        await self.app(scope, receive, learn)
        with contextlib.suppress(ValueError, LookupError, TypeError):
            created = json.loads(b"".join(chunks))["result"]["session_id"]
            self._sessions[created] = _Session(client, self.clock())

    async def sweep(self) -> int:
        """Close the sessions created over HTTP that are idle and attached to no WebSocket;
        returns how many."""
        now = self.clock()
        idle = [
            session_id
            for session_id, session in self._sessions.items()
            if not session.attached and now - session.last_active > self.idle_unattached_s
        ]
        for session_id in idle:
            self._sessions.pop(session_id, None)
            request = {
                "jsonrpc": "2.0",
                "id": "idle",
                "method": "openenv/session/close",
                "params": {"session_id": session_id},
            }
            headers = [(b"content-type", b"application/json")]
            await asgi.send_internal_request(
                self.app, "POST", "/mcp", headers, json.dumps(request).encode()
            )
        return len(idle)

    # --- WebSockets -----------------------------------------------------------------------

    async def _socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = asgi.client_of(scope)
        if self.sessions(client) >= self.per_client:
            await _refuse_socket(receive, send, self._over_limit_message(), "CAPACITY_REACHED")
            return
        attached = None
        requested = asgi.query_parameter(scope, "session_id")
        if requested:
            attached = self._own_session(requested, scope)
            if attached is None:
                await _refuse_socket(receive, send, _unknown(requested), "SESSION_ERROR", 1000)
                return
        self._sockets[client] += 1
        if attached is not None:
            attached.attached = True
        socket = _GuardedSocket(receive, send, scope["path"] in GUARDED_SOCKETS, scope["path"])
        try:
            await self.app(scope, socket.receive, socket.send)
        except (WebSocketDisconnect, WebSocketDisconnected):
            # The client left while a call ran: OpenEnv fails to send it the outcome, then an
            # error about that, and the server would log a traceback each time.
            if not socket.gone:
                raise
        finally:
            self._sockets[client] -= 1
            if not self._sockets[client]:
                del self._sockets[client]
            if attached is not None:
                attached.attached = False
                attached.last_active = self.clock()

    def _over_limit_message(self) -> str:
        return (
            f"this client has {self.per_client} sessions open, as many as one client may; "
            "close one (or let an idle session expire) before opening another"
        )


class _GuardedSocket:
    """A socket's receive and send as OpenEnv is given them. On a guarded path, a frame that
    cannot be a message is answered with an error frame rather than passed on, and what
    OpenEnv's error frames repeat of the input is cut short (`echoes`). A failed send notes
    that the client has gone."""

    def __init__(self, receive: Receive, send: Send, guarded: bool, path: str) -> None:
        self.gone = False
        self._receive = receive
        self._send = send
        self._guarded = guarded
        self._path = path

    async def receive(self) -> Message:
        while True:
            message = await self._receive()
            if not self._guarded or message["type"] != "websocket.receive":
                return message
            refusal = _frame_refusal(message.get("text"), self._path)
            if refusal is None:
                return message
            await self._deliver({"type": "websocket.send", "text": refusal})

    async def send(self, message: Message) -> None:
        text = message.get("text")
        if self._guarded and text and text.startswith(ECHOING_FRAMES):
            message = {**message, "text": briefed_frame(text)}
        await self._deliver(message)

    async def _deliver(self, message: Message) -> None:
        try:
            await self._send(message)
        except OSError:
            self.gone = True
            raise


def _frame_refusal(text: str | None, path: str) -> str | None:
    """The frame that answers a frame which cannot be a message, or None to pass it on."""
    if text is not None and _plainly_a_message(text):
        return None
    try:
        message = json_limits.read(text) if text is not None else None
    except json_limits.Unreadable as why:
        return _error_frame(str(why), "INVALID_JSON")
    except ValueError:
        message = None
    if not isinstance(message, dict):
        return _error_frame(NOT_A_MESSAGE, "INVALID_JSON")
    request = _json_rpc_request(message, path)
    problem = _request_problem(request) if isinstance(request, dict) else None
    if problem is not None:
        refusal = asgi.rpc_error(None, asgi.INVALID_REQUEST, problem)
        return json.dumps(refusal if request is message else {"type": "mcp", "data": refusal})
    return None


def _plainly_a_message(text: str) -> bool:
    """The usual frame, told without reading it (OpenEnv reads it next): an object within
    the bounds of `json_limits.plain`, and no id to check (nor an escape that could spell
    one)."""
    return (
        json_limits.plain(text)
        and text.lstrip()[:1] == "{"
        and '"id"' not in text
        and "\\u" not in text
    )


def _json_rpc_request(message: dict[str, Any], path: str) -> Any:
    """The JSON-RPC request a message carries: on `/mcp` the message itself, on `/ws` the data
    of an "mcp" message."""
    if path == "/mcp":
        return message
    return message.get("data") if message.get("type") == "mcp" else None


def _request_problem(request: dict[str, Any]) -> str | None:
    """Why OpenEnv must not be given a JSON-RPC request, or None. Its response repeats the
    id, so a long one, or one JSON cannot send back, is refused; a session id must be a
    string for OpenEnv to look it up."""
    request_id = request.get("id")
    if isinstance(request_id, str) and len(request_id) > MAX_ID_CHARS:
        return ID_TOO_LONG
    if isinstance(request_id, str) and encodable(request_id) != request_id:
        return ID_NOT_TEXT
    params = request.get("params")
    if isinstance(params, dict) and not isinstance(params.get("session_id", ""), str | None):
        return SESSION_ID_NOT_TEXT
    return None


def _error_frame(message: str, code: str) -> str:
    return json.dumps({"type": "error", "data": {"message": message, "code": code}})


async def _refuse_socket(
    receive: Receive, send: Send, message: str, code: str, close_code: int = 1013
) -> None:
    """Refuse a WebSocket as OpenEnv refuses one (over capacity, or naming an unknown
    session): an error frame, then close."""
    if (await receive())["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": _error_frame(message, code)})
    await send({"type": "websocket.close", "code": close_code})


def _unknown(session_id: str) -> str:
    """OpenEnv's answer to a session id it does not know."""
    return f"Unknown session_id: {session_id}"
