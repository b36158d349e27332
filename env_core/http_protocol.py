"""uvicorn's HTTP/1.1 protocol, with a deadline for a request to arrive whole.

uvicorn waits for a request's head and body for as long as the client takes: a client that
sends part of a request and stops (or trickles it a byte at a time) holds a connection, and a
file descriptor, for good, and a thousand such sockets leave the server unable to accept any
other. Here a request must arrive, head and body, within `REQUEST_S` of its first byte (or of
the connection's opening), as HAProxy's `timeout http-request` bounds it in front of replicas:
past it the client is answered 408 and the connection closed. The wait between requests is
uvicorn's keep-alive timeout (5 s), and a WebSocket, once upgraded, is no longer timed here.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

REQUEST_S = 10.0
LATE = b"the request did not arrive whole within %d s" % REQUEST_S
LATE_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(LATE), LATE)
)


class TimedRequests(H11Protocol):
    """Pass as `uvicorn.Config(http=TimedRequests)`."""

    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._time()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._time()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._time()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timing()
        super().connection_lost(exc)

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
