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
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from anyio import BrokenResourceError, ClosedResourceError
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from pydantic import AnyUrl

from env_core.episode import EpisodeStart, ToolResult
from env_core.errors import error_from
from evals.doors.spec import DoorSpec, check_same_catalog
from evals.local_server import LocalServer, check_reachable, free_port

# Results still carry structuredContent; without output schemas the SDK client skips a
# JSON-schema validation on every call (see the README's MCP benchmark).
SERVER_FLAGS = ["--no-output-schemas"]
DATABASES = AnyUrl("sqlenv://databases")
log = logging.getLogger(__name__)


class MCPDoor:
    def __init__(self, spec: DoorSpec) -> None:
        self.spec = spec
        self.catalog = spec.load_catalog()
        self._server: LocalServer | None = None
        self._entered: list[AbstractContextManager] = []
        self._portal_manager = start_blocking_portal()
        self._portal = self._portal_manager.__enter__()
        try:
            read, write = self._enter(self._transport())[:2]
            self._session: ClientSession = self._enter(ClientSession(read, write))
            self._portal.call(self._session.initialize)
            if spec.url is not None:
                listing = self._portal.call(self._session.read_resource, DATABASES)
                served = json.loads(listing.contents[0].text).get("catalog", {})
                check_same_catalog(spec.url, served, self.catalog, spec.settings.split)
        except BaseException:
            self.close()
            raise

    def _transport(self):
        if self.spec.kind == "mcp-stdio":
            command = ["-m", "sqlenv_mcp", *SERVER_FLAGS, *self.spec.server_arguments()]
            params = StdioServerParameters(
                command=sys.executable, args=command, env={"PATH": os.environ.get("PATH", "")}
            )
            return stdio_client(params, errlog=sys.stderr)
        url = self.spec.url
        if url is not None:
            check_reachable(url, "MCP server", "/healthz")
        else:
            port = free_port()
            command = [sys.executable, "-m", "sqlenv_mcp", "--transport", "http"]
            command += ["--port", str(port), *SERVER_FLAGS, *self.spec.server_arguments()]
            self._server = LocalServer(command, port, "/healthz")
            url = self._server.url
        return streamable_http_client(f"{url}/mcp")

    def _enter(self, manager):
        wrapped = self._portal.wrap_async_context_manager(manager)
        value = wrapped.__enter__()
        self._entered.append(wrapped)
        return value

    def _call(self, tool: str, arguments: Mapping[str, Any]) -> CallToolResult:
        try:
            return self._portal.call(self._session.call_tool, tool, dict(arguments))
        except (ClosedResourceError, BrokenResourceError):
            # The SDK client closes its streams, with no message, when the transport fails.
            where = self._server.url if self._server else self.spec.url or "over stdio"
            raise ConnectionError(
                f"the connection to the MCP server {where} was lost, and its episodes with it"
            ) from None

    def start(self, question_id: str) -> EpisodeStart:
        result = self._call("start_episode", {"question_id": question_id})
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

    def step(self, episode_id: str, tool: str, arguments: Mapping[str, Any]) -> ToolResult:
        result = self._call(tool, {**arguments, "episode_id": episode_id})
        structured = result.structuredContent
        return ToolResult(
            tool,
            structured["ok"],
            _text(result),
            structured["data"],
            structured["reward"],
            structured["done"],
        )

    def end(self, episode_id: str) -> None:
        self._call("end_episode", {"episode_id": episode_id})

    def worker_spec(self) -> DoorSpec:
        return self.spec.at(self._server.url) if self._server else self.spec

    def close(self) -> None:
        """Close the connection and stop the server this door started. Closing a connection
        the server has dropped raises the transport's error again; the calls have reported it,
        so here it is logged, not raised."""
        while self._entered:
            try:
                self._entered.pop().__exit__(None, None, None)
            except Exception as error:
                log.debug("closing a broken MCP connection: %s", error)
        self._portal_manager.__exit__(None, None, None)
        if self._server is not None:
            self._server.stop()
            self._server = None


def _text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)
