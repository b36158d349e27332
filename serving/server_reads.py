"""What our clients read from a server over HTTP, bounded as it arrives: at most `limit` bytes
of body, all within `deadline_s` of the request. A server that streams an endless body, never
ends one, or answers what no sqlenv server would costs a client that much and no more, and
raises `ServerError`: one sentence naming the server's URL.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
from typing import Any

import httpx

from serving import json_limits

# /health, /health, /catalog and /models answer a few kilobytes.
BODY_LIMIT = 1 << 20
DEADLINE_S = 10.0
IDENTITY = {"Accept-Encoding": "identity"}


class ServerError(ConnectionError):
    """A server our client called failed, or is not what it was taken for; `str()` says which
    server, at which URL, and what went wrong."""


def fetch(
    url: str, path: str, what: str, *, limit: int = BODY_LIMIT, deadline_s: float = DEADLINE_S
) -> tuple[int, bytes]:
    """GET url + path from the `what` at `url` (e.g. "OpenEnv server"): its status and body."""
    reading = _read(url.rstrip("/") + path, limit, deadline_s)
    try:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(reading)
        # This thread runs an event loop (a notebook's): block another one, not it.
        with concurrent.futures.ThreadPoolExecutor(1) as thread:
            return thread.submit(asyncio.run, reading).result()
    except TimeoutError:
        reason = f"no complete answer within {deadline_s:g} s"
    except httpx.ConnectError as error:
        reason = _connect_failure(error, url)
    except httpx.HTTPError as error:
        reason = str(error) or type(error).__name__
    except _TooLarge:
        raise ServerError(
            f"the {what} at {url} sent more than {limit:,} bytes for {path or '/'}: "
            f"is that URL the {what}?"
        ) from None
    raise ServerError(f"cannot reach the {what} at {url}: {reason}")


def _connect_failure(error: BaseException, url: str) -> str:
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, socket.gaierror):
            return f"cannot resolve the host {httpx.URL(url).host}"
        cause = cause.__cause__ or cause.__context__
    return "connection refused"


def get_json(url: str, path: str, what: str, **bounds: Any) -> dict[str, Any]:
    """The JSON object the `what` at `url` answers to GET `path` with status 200."""
    status, body = fetch(url, path, what, **bounds)
    if status != 200:
        problem = f"HTTP {status}"
    else:
        try:
            value = json_limits.read(body)
        except ValueError as error:  # json_limits.Unreadable included
            problem = f"no JSON object ({str(error)[:100]})"
        else:
            if isinstance(value, dict):
                return value
            problem = f"JSON that is no object ({type(value).__name__})"
    raise ServerError(
        f"the {what} at {url} answered {path} with {problem}: is that URL the {what}?"
    )


class _TooLarge(Exception):
    pass


async def _read(url: str, limit: int, deadline_s: float) -> tuple[int, bytes]:
    async def whole() -> tuple[int, bytes]:
        body = bytearray()
        async with (
            # Raw bytes, counted as sent: nothing compressed to inflate past the limit.
            httpx.AsyncClient(timeout=deadline_s, headers=IDENTITY) as client,
            client.stream("GET", url) as response,
        ):
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > limit:
                    raise _TooLarge
            return response.status_code, bytes(body)

    return await asyncio.wait_for(whole(), deadline_s)
