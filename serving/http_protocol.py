"""How the doors' HTTP servers take connections: uvicorn's HTTP/1.1 protocol, with a deadline
for a request to arrive whole and a cap on one client's connections, and proxy headers trusted
only from the proxies the operator names.

uvicorn waits for a request's head and body for as long as the client takes: a client that
sends part of a request and stops (or trickles it a byte at a time) holds a connection, and a
file descriptor, for good, and a thousand such sockets leave the server unable to accept any
other. Here a request must arrive, head and body, within `REQUEST_S` of its first byte (or of
the connection's opening), as HAProxy's `timeout http-request` bounds it in front of replicas:
past it the client is answered 408 and the connection closed. The wait between requests is
uvicorn's keep-alive timeout (5 s), and a WebSocket, once upgraded, is no longer timed here.

One client (remote address, an IPv6 /64) has at most `--max-sockets-per-client` TCP connections
open at once, WebSockets included; one more is answered 429 and closed. A trusted proxy's
connections carry many clients and are not counted: the doors' own per-client limits apply to
the client it forwards. uvicorn trusts `X-Forwarded-For` from 127.0.0.1 unless told otherwise:
here it is trusted from `--trusted-proxies` only, and from no one by default.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
from collections import Counter
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from env_core.settings import Settings
from serving.asgi import App, client_address

REQUEST_S = 10.0
REFUSED_S = 1.0  # a refused connection's time to send its request and read the answer
LATE = b"the request did not arrive whole within %d s" % REQUEST_S


def plain_response(status: bytes, text: bytes) -> bytes:
    return (
        b"HTTP/1.1 %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (status, len(text), text)
    )


LATE_RESPONSE = plain_response(b"408 Request Timeout", LATE)


def serve(app: App, listener: socket.socket, settings: Settings, log_level: str, **options: Any):
    """Serve `app` on `listener` until interrupted, taking connections as this module says;
    `options` are more of uvicorn's (e.g. WebSocket limits)."""
    trusted = settings.trusted_proxies
    sockets = SocketCount(settings.max_sockets_per_client, trusted)
    config = uvicorn.Config(
        app,
        log_level=log_level,
        http=functools.partial(GuardedConnection, sockets=sockets),  # type: ignore[arg-type]
        proxy_headers=trusted is not None,
        forwarded_allow_ips=trusted or "",
        **options,
    )
    uvicorn.Server(config).run(sockets=[listener])


class SocketCount:
    """The TCP connections open per client, at most `limit` each; a connection from one of
    the `trusted` proxies (addresses or networks, comma-separated) is not counted."""

    def __init__(self, limit: int, trusted: str | None) -> None:
        self.limit = limit
        self.trusted = [
            ipaddress.ip_network(n, strict=False) for n in (trusted or "").split(",") if n
        ]
        self.open: Counter[str] = Counter()
        self.refusal = plain_response(
            b"429 Too Many Requests",
            b"this client has %d connections open to this server, as many as one client "
            b"may: close one first" % limit,
        )

    def take(self, host: str) -> str | None:
        """The client a new connection from `host` is counted for ("" if not counted), or
        None if it is refused."""
        if self._is_trusted(host):
            return ""
        client = client_address(host)
        if self.open[client] >= self.limit:
            return None
        self.open[client] += 1
        return client

    def give_back(self, client: str) -> None:
        if client:
            self.open[client] -= 1
            if not self.open[client]:
                del self.open[client]

    def _is_trusted(self, host: str) -> bool:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        address = getattr(address, "ipv4_mapped", None) or address
        return any(address in network for network in self.trusted)


class GuardedConnection(H11Protocol):
    """One HTTP connection, counted in `sockets` until it closes (a WebSocket too, once
    upgraded), and timed while a request arrives."""

    _deadline: asyncio.TimerHandle | None = None
    _client: str | None = None  # as `SocketCount.take` counted it, until given back
    _refused = False

    def __init__(self, *, sockets: SocketCount, **options: Any) -> None:
        super().__init__(**options)
        self.sockets = sockets

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        host = self.client[0] if self.client else ""
        self._client = self.sockets.take(host)
        if self._client is None:
            self._refuse()
        else:
            self._time()

    def _refuse(self) -> None:
        """Answer 429 and end the connection. The answer is sent at once, with its end; the
        socket is closed once the client has sent its request (read, so that closing does not
        reset the connection before the client reads the answer), or after `REFUSED_S`."""
        self._refused = True
        self.transport.write(self.sockets.refusal)
        self.transport.write_eof()
        self.loop.call_later(REFUSED_S, self.transport.close)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            self.transport.close()
            return
        super().data_received(data)
        self._time()

    def eof_received(self) -> None:
        if self._refused:
            self.transport.close()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        super().handle_websocket_upgrade(event)
        # The WebSocket's protocol has the transport from here on, and is told of its end.
        websocket = self.transport.get_protocol()
        lost = websocket.connection_lost

        def give_back_then_lose(exc: Exception | None) -> None:
            self._give_back()
            lost(exc)

        websocket.connection_lost = give_back_then_lose  # type: ignore[method-assign]

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._time()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timing()
        self._give_back()
        super().connection_lost(exc)

    def _give_back(self) -> None:
        if self._client is not None:
            self.sockets.give_back(self._client)
            self._client = None

    def _time(self) -> None:
        """Time the request while one is arriving: from the connection's opening, or the
        first byte of the next request, until its body is whole."""
        if self._arriving():
            if self._deadline is None:
                self._deadline = self.loop.call_later(REQUEST_S, self._late)
        else:
            self._stop_timing()

    def _arriving(self) -> bool:
        if self.transport.get_protocol() is not self:  # upgraded to a WebSocket
            return False
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            return True
        if state is not h11.IDLE or self.conn.our_state is not h11.IDLE:
            return False  # whole, or being answered
        # A new connection, or part of the next request's head.
        return self.cycle is None or bool(self.conn.trailing_data[0])

    def _stop_timing(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _late(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or not self._arriving():
            return
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(LATE_RESPONSE)
        self.transport.close()
