"""Fair use of the MCP HTTP server's sessions.

The SDK caps the sessions of the whole server and ends a session after a long idle time
(30 min), so one client that opens sessions and never ends them could take every one for
that long. This middleware caps the sessions one client (remote address) holds open, and
ends a session not in use (in episode mode: holding no episode) once it has been idle for a
short time, by sending the SDK the DELETE request a client sends to end its session; a
client at its cap that opens another ends its least recently used one not in use that way.
A session's id is honoured only from the client that opened it.

It also reads each request's body before the SDK does, and answers in its place one the SDK
would mishandle (`sqlenv_mcp.jsonrpc`): with a 500 and a traceback (a number too long to read,
nesting too deep, bytes that are not UTF-8), by keeping it parsed at many times its size until
the connection's next request (`serving.json_limits`), or by never answering it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.responses import PlainTextResponse, Response

from serving import asgi
from serving.asgi import App, Message, Receive, Scope, Send
from sqlenv_mcp import jsonrpc
from sqlenv_mcp.sdk import MAX_REQUEST_BYTES, error_status

SESSION_HEADER = b"mcp-session-id"
PROTOCOL_VERSION_HEADER = b"mcp-protocol-version"
# A client at its cap that opens another session ends its own least recently used one not in
# use, if idle this long: many clients never end theirs (HTTP DELETE), and were locked out until
# their sessions expired. One idle for less may be about to start its episode.
REPLACEABLE_AFTER_S = 2.0
UNKNOWN_SESSION = b"-"  # no session the SDK makes has this id (it makes hex ones)
# The SDK answers requests by id: a second request with the id of one still running took its
# answer and left the first without one.
ID_RUNNING = "a request with this id is still running in this session: give each its own id"


@dataclass
class _Session:
    client: str
    last_active: float
    in_flight: int = 0
    running: set[str] = field(default_factory=set)  # the ids of its requests in flight


class SessionGuard:
    """Wraps the MCP HTTP app. `in_use(session_id)` tells a session that must not be ended
    early (in episode mode: one holding an episode)."""

    def __init__(
        self,
        app: App,
        in_use: Callable[[str], bool],
        *,
        per_client: int,
        idle_unused_s: float,
        idle_s: float,
        path: str = "/mcp",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.in_use = in_use
        self.per_client = per_client
        self.idle_unused_s = idle_unused_s
        self.idle_s = idle_s
        self.path = path
        self.clock = clock
        self._sessions: dict[str, _Session] = {}

    def open_sessions(self, client: str) -> int:
        return sum(session.client == client for session in self._sessions.values())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            interval = max(self.idle_unused_s / 4, 0.5)
            await self.app(scope, asgi.sweeping_while_running(receive, self.sweep, interval), send)
            return
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        request_id = None
        if scope["method"] == "POST":
            body = await asgi.read_body(scope, receive, MAX_REQUEST_BYTES)
            if body is None:  # as the SDK answers it
                await PlainTextResponse("Request body too large", 413)(scope, receive, send)
                return
            screened = jsonrpc.screen(body)
            if screened.error is not None:  # a request the SDK could answer is answered as one
                error, version = screened.error, asgi.header(scope, PROTOCOL_VERSION_HEADER)
                code = error["error"]["code"]
                status = 400 if error["id"] is None else error_status(version, code)
                await asgi.respond_json(send, status, error)
                return
            if screened.ignored:
                await Response(status_code=202)(scope, receive, send)
                return
            request_id = _request_id(screened.message)
            receive = asgi.replaying(body, receive)
        session_id = asgi.header(scope, SESSION_HEADER)
        if session_id is None:
            await self._open(scope, receive, send)
            return
        session = self._sessions.get(session_id)
        if session is not None and session.client != asgi.client_of(scope):
            # A session id is no bearer capability: from another client it is unknown, answered
            # by the SDK as any id it does not know.
            scope = {**scope, "headers": _without_session(scope["headers"])}
            scope["headers"].append((SESSION_HEADER, UNKNOWN_SESSION))
            session = None
        if session is None:  # unknown or ended: the SDK answers 404
            await self.app(scope, receive, send)
            return
        if request_id in session.running:
            await asgi.respond_json(
                send, 400, asgi.rpc_error(None, asgi.INVALID_REQUEST, ID_RUNNING)
            )
            return
        if request_id is not None:
            session.running.add(request_id)
        session.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            session.in_flight -= 1
            session.running.discard(request_id)
            session.last_active = self.clock()
            if scope["method"] == "DELETE":
                self._sessions.pop(session_id, None)

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request without a session id: the one that opens a session."""
        client = asgi.client_of(scope)
        await self.sweep()
        if self.open_sessions(client) >= self.per_client and not await self._replace(client):
            message = (
                f"this client has {self.per_client} MCP sessions open, as many as one "
                "client may; end one (HTTP DELETE, which MCP clients send when they close) or "
                "let an idle one expire"
            )
            error = asgi.rpc_error(None, asgi.SERVER_ERROR, message)
            await asgi.respond_json(send, 429, error, ((b"retry-after", b"60"),))
            return

        async def learn(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                for key, value in message.get("headers", ()):
                    if key == SESSION_HEADER:
                        session_id = value.decode("latin-1")
                        self._sessions[session_id] = _Session(client, self.clock())
            await send(message)

        await self.app(scope, receive, learn)

    async def _replace(self, client: str) -> bool:
        """End the client's least recently used session not in use, if one has been idle
        for `REPLACEABLE_AFTER_S`; False if none has."""
        now = self.clock()
        replaceable = [
            (session.last_active, session_id)
            for session_id, session in self._sessions.items()
            if session.client == client
            and not session.in_flight
            and now - session.last_active >= REPLACEABLE_AFTER_S
            and not self.in_use(session_id)
        ]
        if not replaceable:
            return False
        await self._end(min(replaceable)[1])
        return True

    async def _end(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        headers = [(b"host", b"localhost:0"), (SESSION_HEADER, session_id.encode())]
        await asgi.send_internal_request(self.app, "DELETE", self.path, headers)

    async def sweep(self) -> int:
        """End the idle sessions not in use, forget the ones the SDK ended; returns how
        many were ended."""
        now = self.clock()
        ended = 0
        for session_id, session in list(self._sessions.items()):
            if session.in_flight:
                continue
            idle = now - session.last_active
            if idle > self.idle_s:
                self._sessions.pop(session_id, None)  # the SDK has ended it
            elif idle > self.idle_unused_s and not self.in_use(session_id):
                await self._end(session_id)
                ended += 1
        return ended


def _without_session(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(key, value) for key, value in headers if key != SESSION_HEADER]


def _request_id(message: dict) -> str | None:
    """The id of a JSON-RPC request as its JSON (so that 1 and "1" differ), or None."""
    return json.dumps(message["id"]) if "method" in message and "id" in message else None
