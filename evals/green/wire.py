"""What crosses the wire to and from another agent, checked as it arrives: the bytes of each
answer a remote agent sends are counted as they come and refused past a bound (the SDK client
reads a reply whole, however large), and a request body is screened before the SDK parses it
(which answers bytes that are not JSON with a traceback in the log, and a lone surrogate with
a 500)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from serving import asgi, json_limits

NOT_JSON = "the request body is not JSON"
NOT_UNICODE = "a request must be valid Unicode text (it holds a lone surrogate)"


class ReplyTooLarge(httpx.ReadError):
    """An answer over its bound: the connection is dropped where the bound was passed."""


class BoundedStream(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, limit: int) -> None:
        self._stream = stream
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        async for chunk in self._stream:
            received += len(chunk)
            if received > self._limit:
                raise ReplyTooLarge(f"its answer is over {self._limit:,} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class BoundedTransport(httpx.AsyncBaseTransport):
    """An HTTP transport whose every response body (a reply, a whole event stream) may be at
    most `limit` bytes; past it, reading fails with `ReplyTooLarge`."""

    def __init__(self, limit: int) -> None:
        self._transport = httpx.AsyncHTTPTransport()
        self._limit = limit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._transport.handle_async_request(request)
        response.stream = BoundedStream(response.stream, self._limit)
        return response

    async def aclose(self) -> None:
        await self._transport.aclose()


def refusal(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error a request body gets before the SDK reads it, or None to pass it on."""
    try:
        message = json_limits.read(body)
    except ValueError:  # json_limits.Unreadable included
        return asgi.rpc_error(None, asgi.PARSE_ERROR, NOT_JSON)
    try:
        json.dumps(message, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return asgi.rpc_error(None, asgi.INVALID_REQUEST, NOT_UNICODE)
    return None


def without_credentials(url: str) -> str:
    """The URL with any user:password in it left out, as logs show it."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))
