"""MCP client sessions on whichever major of the SDK is installed, so that the MCP door's tests
run on both (make test runs them with mcp 1.x and again with mcp 2.x). Results are read by the
protocol's names (`structuredContent`, `isError`), as mcp 1.x names their attributes; mcp 2.x
names them in snake case. On mcp 2.x a session opens with the handshake (`mode="legacy"`): these
tests are of the handshake era, whose connection holds its current episode."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel

MAJOR = int(version("mcp").partition(".")[0])

if MAJOR >= 2:
    from mcp import Client
    from mcp.shared.exceptions import MCPError as ProtocolError
else:
    from mcp.shared.exceptions import McpError as ProtocolError
    from mcp.shared.memory import create_connected_server_and_client_session

__all__ = ["ProtocolError", "Session", "connect", "http_session", "wired"]


class Wire:
    """An SDK model read by the protocol's names (camel case), and by the SDK's own."""

    def __init__(self, model: BaseModel) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Any:
        model = self._model
        found = getattr(model, name) if hasattr(model, name) else getattr(model, _snake(name))
        return wired(found)

    def __repr__(self) -> str:
        return repr(self._model)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def wired(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return Wire(value)
    if isinstance(value, list):
        return [wired(item) for item in value]
    return value


class Session:
    """A client session (or mcp 2.x `Client`) whose results are read as `Wire`s."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._session, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return wired(await method(*args, **kwargs))

        return call


@asynccontextmanager
async def connect(server: Any) -> AsyncIterator[Session]:
    """An in-memory client of `server`, initialised."""
    if MAJOR >= 2:
        async with Client(server, mode="legacy") as client:
            yield Session(client)
        return
    async with create_connected_server_and_client_session(server) as client:
        yield Session(client)


@asynccontextmanager
async def http_session(url: str) -> AsyncIterator[tuple[Session, Any]]:
    """An initialised client session of the streamable-HTTP server at `url`, and the result
    of its initialisation."""
    async with (
        streamable_http_client(url) as (read, write, *_session_id),
        ClientSession(read, write) as client,
    ):
        initialized = await client.initialize()
        yield Session(client), wired(initialized)
