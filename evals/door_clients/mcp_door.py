"""The MCP door: an MCP SDK client over stdio or streamable HTTP, driven synchronously.

The client is async; a blocking portal runs its event loop in a thread so `evaluate` stays
plain synchronous code. Each context manager is entered through the portal so that its task
group lives in one task for its whole life.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

import httpx
from anyio import BrokenResourceError, ClosedResourceError
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import CONNECTION_CLOSED, CallToolResult
from pydantic import AnyUrl

from env_core.episode import EpisodeStart, ToolResult
from env_core.errors import error_from
from evals.door_clients.spec import DoorSpec, check_same_catalog, check_same_episodes
from serving.local_server import LocalServer, check_reachable

# Results still carry structuredContent; without output schemas the SDK client skips a
# JSON-schema validation on every call (see the README's MCP benchmark).
SERVER_FLAGS = ["--no-output-schemas"]
DATABASES = AnyUrl("sqlenv://databases")
# The SDK client's error for a call its server answered 404: the session is gone.
SESSION_TERMINATED = "Session terminated"
# How much longer than a query may run a call may wait for its answer (a new database's
# schema read, a wait for a SQL worker): past it, the server is taken to be stuck.
REPLY_MARGIN_S = 60.0
# The wait for a server whose query timeout the client does not know.
DEFAULT_REPLY_S = 120.0
log = logging.getLogger(__name__)


class MCPSession:
    """One MCP client session, driven synchronously through a blocking portal; `transport`
    makes the client transport (it runs in the portal's event loop)."""

    def __init__(
        self, transport: Callable[[], Any], where: str, reply_s: float = DEFAULT_REPLY_S
    ) -> None:
        """`reply_s`: how long a call may wait for its answer before the server is given up
        on (the SDK waits as long as its transport does: forever over stdio)."""
        self.where = where
        self.reply_s = reply_s
        self._entered: list[AbstractContextManager] = []
        self._portal_manager = start_blocking_portal()
        self._portal = self._portal_manager.__enter__()
        try:
            read, write = self._enter(transport())[:2]
            waiting = timedelta(seconds=reply_s)
            self._session: ClientSession = self._enter(ClientSession(read, write, waiting))
            self._portal.call(self._session.initialize)
        except BaseException:
            self.close()
            raise

    def _enter(self, manager):
        wrapped = self._portal.wrap_async_context_manager(manager)
        value = wrapped.__enter__()
        self._entered.append(wrapped)
        return value

    def call(self, tool: str, arguments: Mapping[str, Any]) -> CallToolResult:
        try:
            return self._portal.call(self._session.call_tool, tool, dict(arguments))
        except (ClosedResourceError, BrokenResourceError):
            # The SDK client closes its streams, with no message, when the transport fails.
            raise self._lost() from None
        except McpError as error:
            # A server that no longer knows the session (it restarted) answers 404; one that
            # has gone closes the connection; one that is stuck does not answer.
            if error.error.code == httpx.codes.REQUEST_TIMEOUT:
                raise ConnectionError(
                    f"the MCP server {self.where} did not answer within {self.reply_s:g} s; "
                    "its episodes are given up"
                ) from None
            if error.error.message == SESSION_TERMINATED or error.error.code == CONNECTION_CLOSED:
                raise self._lost() from None
            raise

    def _lost(self) -> ConnectionError:
        return ConnectionError(
            f"the connection to the MCP server {self.where} was lost, and its episodes with it"
        )

    def read(self, resource: AnyUrl) -> str:
        listing = self._portal.call(self._session.read_resource, resource)
        return listing.contents[0].text

    def close(self) -> None:
        """Closing a connection the server has dropped raises the transport's error again;
        the calls have reported it, so here it is logged, not raised. A call still waiting
        for its answer (the caller was interrupted: Ctrl-C) is cancelled."""
        while self._entered:
            try:
                self._entered.pop().__exit__(None, None, None)
            except Exception as error:
                log.debug("closing a broken MCP connection: %s", error)
        self._portal.call(self._portal.stop, True)
        self._portal_manager.__exit__(None, None, None)


class MCPDoorClient:
    def __init__(self, spec: DoorSpec) -> None:
        self.spec = spec
        self.catalog = spec.load_catalog()
        self._server: LocalServer | None = None
        try:
            transport, where = self._transport()
            reply_s = spec.settings.query_timeout_s + REPLY_MARGIN_S
            self._session = MCPSession(transport, where, reply_s)
            if spec.url is not None:
                served = json.loads(self._session.read(DATABASES)).get("catalog", {})
                check_same_catalog(spec.url, served, self.catalog, spec.settings.split)
                check_same_episodes(spec.url, served, spec.settings)
        except BaseException:
            self.close()
            raise

    def _transport(self) -> tuple[Callable[[], Any], str]:
        if self.spec.kind == "mcp-stdio":
            command = ["-m", "sqlenv_mcp", *SERVER_FLAGS, *self.spec.server_arguments()]
            params = StdioServerParameters(
                command=sys.executable, args=command, env={"PATH": os.environ.get("PATH", "")}
            )
            return (lambda: stdio_client(params, errlog=sys.stderr)), "over stdio"
        url = self.spec.url
        if url is not None:
            check_reachable(url, "MCP server", "/health")
        else:
            command = [sys.executable, "-m", "sqlenv_mcp", "--transport", "http"]
            command += [*SERVER_FLAGS, *self.spec.server_arguments()]
            self._server = LocalServer(command, "/health")
            url = self._server.url
        return (lambda: streamable_http_client(f"{url}/mcp")), url

    def start(self, question_id: str) -> EpisodeStart:
        return episode_start(self._session.call("start_episode", {"question_id": question_id}))

    def step(self, episode_id: str, tool: str, arguments: Mapping[str, Any]) -> ToolResult:
        result = self._session.call(tool, {**arguments, "episode_id": episode_id})
        return tool_result(tool, result)

    def end(self, episode_id: str) -> None:
        self._session.call("end_episode", {"episode_id": episode_id})

    def worker_spec(self) -> DoorSpec:
        return self.spec.at(self._server.url) if self._server else self.spec

    def close(self) -> None:
        """Close the session and stop the server this client started."""
        session = getattr(self, "_session", None)
        if session is not None:
            session.close()
        if self._server is not None:
            self._server.stop()
            self._server = None


def episode_start(result: CallToolResult) -> EpisodeStart:
    """start_episode's result as the engine's `EpisodeStart`; its error raised."""
    started = result.structuredContent or {}
    if result.isError:
        raise error_from(started.get("error") or {"message": _text(result)})
    return EpisodeStart(
        started["episode_id"],
        started["question"],
        started["db_id"],
        tuple(started["tables"]),
        started["budget"],
        _text(result),
    )


def tool_result(tool: str, result: CallToolResult) -> ToolResult:
    """A tool's result as the engine's `ToolResult`."""
    structured = result.structuredContent
    return ToolResult(
        tool,
        structured["ok"],
        _text(result),
        structured["data"],
        structured["reward"],
        structured["done"],
    )


def _text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)
