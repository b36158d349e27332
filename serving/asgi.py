"""ASGI plumbing the doors' HTTP servers share (standard library only, no web framework).

The doors guard their connections with ASGI middleware: they read a request's client and
headers, answer some requests themselves, end idle connections by sending the application the
request a client would send to end them, and sweep periodically while the server runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


def query_parameter(scope: Scope, name: str) -> str | None:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(name)
    return values[0] if values else None


def client_of(scope: Scope) -> str:
    """The remote address (behind a trusted proxy, the one it forwarded), as `client_address`
    names it."""
    client = scope.get("client")
    return client_address(client[0]) if client else "unknown"


def client_address(host: str) -> str:
    """The client a remote address is. An IPv6 client is its /64 network: one host is
    commonly given all of one, so a single address is no client."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # a Unix socket's path, or a proxy's name for its client
        return host
    if address.version == 4:
        return host
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.ip_network(f"{address}/64", strict=False))


# JSON-RPC error codes the guards answer with: unreadable JSON, an invalid request, invalid
# params, and the implementation-defined server error (a limit reached).
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, SERVER_ERROR = -32700, -32600, -32602, -32000


def rpc_error(request_id: object, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


async def respond_json(
    send: Send, status: int, payload: object, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    """A request's whole body, or None as soon as it is over `limit` bytes (declared or sent)."""
    declared = header(scope, b"content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        return None
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return bytes(body)
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            return bytes(body)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the body read (`read_body`) once, then what the client sends next
    (its disconnect), as a streaming response waits for."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def send_internal_request(
    app: App, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes = b""
) -> None:
    """Make a request of `app` from inside the server; its response is discarded."""
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 0),
    }

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def discard(_message: Message) -> None:
        return None

    await app(scope, receive, discard)


def sweeping_while_running(
    receive: Receive, sweep: Callable[[], Awaitable[object]], interval_s: float
) -> Receive:
    """A lifespan's receive that runs `sweep` every `interval_s` from startup to shutdown."""
    task: asyncio.Task | None = None

    async def sweep_periodically() -> None:
        while True:
            await asyncio.sleep(interval_s)
            await sweep()

    async def watched() -> Message:
        nonlocal task
        message = await receive()
        if message["type"] == "lifespan.startup":
            task = asyncio.create_task(sweep_periodically())
        elif message["type"] == "lifespan.shutdown" and task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return message

    return watched


# The descriptor of a socket the process that started this one has bound for its server, so
# that no other socket can take the port in the seconds before the server listens
# (`serving.local_server.LocalServer` sets it).
INHERITED_LISTENER_VARIABLE = "SQLENV_LISTENER_FD"


def listening_socket(host: str, port: int) -> socket.socket:
    """The socket a server listens on, made before it says it is serving: the one named by
    $SQLENV_LISTENER_FD when that is bound to host:port, else `bound_socket(host, port)`."""
    inherited = _inherited_listener(host, port)
    return inherited if inherited is not None else bound_socket(host, port)


def bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to host:port (0: a free port), for a server here or in a process it
    is handed to; an `OSError` that says which address when it cannot be (in use, not
    allowed, no such address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # Named TCP, so that asyncio turns Nagle's algorithm off on each connection it accepts: a
    # response written in two parts (headers, body) would otherwise wait ~40 ms for an ACK.
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        listener.close()
        reason = (error.strerror or str(error)).lower()
        raise OSError(f"cannot listen on {host}:{port}: {reason}") from None
    return listener


def _inherited_listener(host: str, port: int) -> socket.socket | None:
    """The inherited socket bound to host:port, if the variable names one; the variable is
    used once, so the processes this one starts do not read it."""
    descriptor = os.environ.pop(INHERITED_LISTENER_VARIABLE, "")
    if not descriptor.isdigit():
        return None
    try:
        listener = socket.socket(fileno=int(descriptor))
    except OSError:  # not a socket (any more)
        return None
    if listener.type != socket.SOCK_STREAM or listener.getsockname()[:2] != (host, port):
        listener.detach()  # another socket of this process: not ours to close
        return None
    return listener
