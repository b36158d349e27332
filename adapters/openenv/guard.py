"""Fair use of the OpenEnv server, in front of OpenEnv's own application.

- Request bodies are limited (413) before any of them is parsed.
- One client (remote address) holds at most `per_client` connections: WebSockets, and OpenEnv
  sessions created over HTTP (`openenv/session/create` on `POST /mcp`).
- A session created over HTTP holds no capacity for long unless a WebSocket attaches to it
  (`/ws?session_id=...`): once idle for `idle_unattached_s` it is closed with the request a
  client sends to close it (`openenv/session/close`).
- A WebSocket frame that cannot be a message (binary, or JSON that is not an object) gets an
  error frame and the session goes on; OpenEnv would end the session.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from env_core import asgi
from env_core.asgi import App, Message, Receive, Scope, Send

GUARDED_SOCKETS = ("/ws", "/mcp")


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

    def connections(self, client: str) -> int:
        unattached = sum(s.client == client and not s.attached for s in self._sessions.values())
        return self._sockets[client] + unattached

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            interval = max(self.idle_unattached_s / 4, 0.5)
            await self.app(scope, asgi.sweeping_while_running(receive, self.sweep, interval), send)
        elif scope["type"] == "websocket":
            await self._socket(scope, receive, send)
        elif scope["type"] == "http":
            await self._request(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    # --- HTTP ---------------------------------------------------------------------------

    async def _request(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await self._body(scope, receive)
        if body is None:
            detail = f"the request body is over the limit of {self.max_body_bytes} bytes"
            await asgi.respond_json(send, 413, {"detail": detail})
            return

        replayed = False

        async def replay() -> Message:
            # The body once, then what the client sends next (its disconnect), as a
            # streaming response waits for.
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        if scope["path"] == "/mcp" and scope["method"] == "POST":
            await self._json_rpc(scope, body, replay, send)
        else:
            await self.app(scope, replay, send)

    async def _body(self, scope: Scope, receive: Receive) -> bytes | None:
        """The whole body, or None as soon as it is over the limit."""
        declared = asgi.header(scope, b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
            return None
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return bytes(body)
            body += message.get("body", b"")
            if len(body) > self.max_body_bytes:
                return None
            if not message.get("more_body", False):
                return bytes(body)

    async def _json_rpc(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if not isinstance(request, dict):
            await self.app(scope, receive, send)  # OpenEnv answers with its parse error
            return
        method, params = request.get("method"), request.get("params")
        session_id = params.get("session_id") if isinstance(params, dict) else None
        if isinstance(session_id, str) and session_id in self._sessions:
            self._sessions[session_id].last_active = self.clock()
        if method == "openenv/session/create":
            await self._create(scope, receive, send, request.get("id"))
            return
        await self.app(scope, receive, send)
        if method == "openenv/session/close" and isinstance(session_id, str):
            self._sessions.pop(session_id, None)

    async def _create(self, scope: Scope, receive: Receive, send: Send, request_id: object) -> None:
        client = asgi.client_of(scope)
        await self.sweep()
        if self.connections(client) >= self.per_client:
            error = {"code": -32000, "message": self._over_limit_message()}
            await asgi.respond_json(send, 200, {"jsonrpc": "2.0", "id": request_id, "error": error})
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
        if self.connections(client) >= self.per_client:
            await _refuse_socket(receive, send, self._over_limit_message())
            return
        attached = self._sessions.get(asgi.query_parameter(scope, "session_id") or "")
        self._sockets[client] += 1
        if attached is not None:
            attached.attached = True
        try:
            if scope["path"] in GUARDED_SOCKETS:
                receive = _checked_frames(receive, send)
            await self.app(scope, receive, send)
        finally:
            self._sockets[client] -= 1
            if not self._sockets[client]:
                del self._sockets[client]
            if attached is not None:
                attached.attached = False
                attached.last_active = self.clock()

    def _over_limit_message(self) -> str:
        return (
            f"this client has {self.per_client} connections open, as many as one client may; "
            "close one (or let an idle session expire) before opening another"
        )


def _checked_frames(receive: Receive, send: Send) -> Receive:
    """A socket's receive that answers frames that cannot be a message with an error frame."""

    async def checked() -> Message:
        while True:
            message = await receive()
            if message["type"] != "websocket.receive":
                return message
            text = message.get("text")
            if text is not None and text.lstrip()[:1] == "{":
                return message
            error = (
                "a message must be a JSON object with a 'type' (reset, step, state, close or "
                "mcp), sent as a text frame"
            )
            await send({"type": "websocket.send", "text": _error_frame(error, "INVALID_JSON")})

    return checked


def _error_frame(message: str, code: str) -> str:
    return json.dumps({"type": "error", "data": {"message": message, "code": code}})


async def _refuse_socket(receive: Receive, send: Send, message: str) -> None:
    """Refuse a WebSocket as OpenEnv refuses one over capacity: an error frame, then close."""
    if (await receive())["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": _error_frame(message, "CAPACITY_REACHED")})
    await send({"type": "websocket.close", "code": 1013})
