"""The MCP SDK as this server uses it, on either of its majors; every difference is here.

- mcp 1.x (`FastMCP`): the handshake era, protocol versions 2024-11-05 to 2025-11-25. OpenEnv
  needs it (fastmcp 3 requires mcp<2), so the `openenv` extra installs it.
- mcp 2.x (`MCPServer`): the handshake era and 2026-07-28, which has no `initialize` and no
  session: each request carries its protocol version, and a tool call acts on an episode by
  its id alone. A plain install of the package gets it.

Tools are served on the SDK's low-level server with the arguments as sent (see
`sqlenv_mcp.agent_tools`); a handler learns who calls it from a `Caller`.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from mcp import types
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.types import ASGIApp

MAJOR = int(version("mcp").partition(".")[0])
# The largest request body the SDK takes (its DEFAULT_MAX_REQUEST_BODY_SIZE on 1.30 and 2.3;
# mcp 2.0.0, which verifiers 0.4 pins, names none): the stdio lines and HTTP bodies we screen.
MAX_REQUEST_BYTES = 4 * 2**20

if MAJOR >= 2:
    from mcp.server.mcpserver import MCPServer as HighLevelServer
    from mcp.shared.exceptions import MCPError
    from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
    from mcp_types.methods import validate_client_notification
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
    from pydantic import ValidationError

    CLIENT_REQUESTS: Any = types.ClientRequest
    CLIENT_NOTIFICATIONS: Any = types.ClientNotification
else:
    from mcp.server.fastmcp import FastMCP as HighLevelServer
    from mcp.shared.exceptions import McpError
    from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS as HANDSHAKE_PROTOCOL_VERSIONS

    MODERN_PROTOCOL_VERSIONS = ()
    CLIENT_REQUESTS = types.ClientRequestType
    CLIENT_NOTIFICATIONS = types.ClientNotificationType

# The protocol versions this install speaks, oldest first.
PROTOCOL_VERSIONS: tuple[str, ...] = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
# Where a request of the sessionless protocol names its version.
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"


def sessionless_version(message: Any) -> str | None:
    """The sessionless protocol version a message (parsed JSON) names in its envelope, if
    this install speaks it."""
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(VERSION_KEY) if isinstance(meta, dict) else None
    return version if version in MODERN_PROTOCOL_VERSIONS else None


def error_status(protocol_version: str | None, code: int) -> int:
    """The HTTP status of a JSON-RPC error answering a request that names its id, sent with
    this protocol version (its MCP-Protocol-Version header): 200, but in the sessionless
    protocol the status its specification gives the code."""
    if protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return 200
    return ERROR_CODE_HTTP_STATUS.get(code, 200)


def malformed_for_its_version(notification: dict[str, Any]) -> bool:
    """Whether the version a notification's envelope names does not define it so (the SDK
    would drop it, logging a line each time)."""
    version = sessionless_version(notification)
    if version is None:
        return False
    try:
        validate_client_notification(notification["method"], version, notification["params"])
    except (ValidationError, KeyError, ValueError):
        return True
    return False


# Given a callback, calls it (with no arguments) once the caller's connection has ended.
WhenClosed = Callable[[Callable[[], None]], object]


@dataclass(frozen=True)
class Caller:
    """Who makes a call. `connection`: an object that lives as long as the caller's MCP
    connection (a stdio process, an HTTP session), or None for a request of the sessionless
    protocol; `when_closed` registers what to do when that connection ends (None if there
    is none); `request`: the HTTP request (None over stdio)."""

    connection: object | None
    when_closed: WhenClosed | None
    request: Request | None


# The tools' listing, and the answer to a call of one by name with the arguments as sent.
ListTools = Callable[[], Awaitable[list[types.Tool]]]
CallTool = Callable[[Caller, str, dict[str, Any]], Awaitable[types.CallToolResult]]


def protocol_error(code: int, message: str) -> Exception:
    """The exception the SDK answers with this JSON-RPC error."""
    if MAJOR >= 2:
        return MCPError(code, message)
    return McpError(types.ErrorData(code=code, message=message))


def parse_message(message: dict[str, Any]) -> Any:
    """A JSON-RPC message (parsed JSON) as the SDK's model; pydantic's ValidationError if it
    is none."""
    if MAJOR >= 2:
        return types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    return types.JSONRPCMessage.model_validate(message)


def message_json(message: Any) -> str:
    """A message of the SDK's as the JSON it writes to a transport."""
    if MAJOR >= 2:
        return message.model_dump_json(by_alias=True, exclude_unset=True)
    return message.model_dump_json(by_alias=True, exclude_none=True)


def without_output_schema(tool: types.Tool) -> types.Tool:
    return tool.model_validate(
        tool.model_dump(by_alias=True, exclude_none=True, exclude={"output_schema", "outputSchema"})
    )


@dataclass(frozen=True)
class HttpOptions:
    """How the streamable-HTTP application is built (by default, as the SDK builds it)."""

    host: str = "127.0.0.1"
    port: int = 8000
    session_idle_timeout: float = 1800.0
    max_sessions: int = 10_000
    transport_security: TransportSecuritySettings | None = None
    stateless: bool = False  # each request served on its own, with no session


SDK_DEFAULTS = HttpOptions()


class SdkServer(HighLevelServer):
    """The SDK's high-level server (for resources, prompts and custom routes), named with the
    package's version, with tools served by `serve_tools` on its low-level server. Calls are
    answered with one JSON body rather than a server-sent event stream: no tool streams
    progress, and the stream costs a third of the server's time per call (docs/profiles.md)."""

    def __init__(
        self,
        name: str,
        *,
        instructions: str | None = None,
        version: str,
        http: HttpOptions = SDK_DEFAULTS,
    ) -> None:
        self.http = http
        if MAJOR >= 2:
            super().__init__(
                name,
                instructions=instructions,
                version=version,
                log_level="WARNING",
            )
            self.lowlevel = self._lowlevel_server
            return
        super().__init__(
            name,
            instructions=instructions,
            # mcp 1.x enters it once per connection: what ends with the connection is kept in it.
            lifespan=_connection_lifespan,
            log_level="WARNING",
            host=http.host,
            port=http.port,
            streamable_http_path="/mcp",
            json_response=True,
            stateless_http=http.stateless,
            session_idle_timeout=http.session_idle_timeout,
            max_sessions=http.max_sessions,
            transport_security=http.transport_security,
        )
        self.lowlevel = self._mcp_server
        self.lowlevel.version = version

    def streamable_http_app(self) -> ASGIApp:
        if MAJOR < 2:
            return super().streamable_http_app()
        if "session_idle_timeout" not in inspect.signature(super().streamable_http_app).parameters:
            raise ImportError(
                f"serving MCP over HTTP needs mcp 2.3 or later, not {version('mcp')} "
                "(stdio works on it): pip install -U 'mcp>=2.3'"
            )
        return super().streamable_http_app(
            streamable_http_path="/mcp",
            json_response=True,
            stateless_http=self.http.stateless,
            session_idle_timeout=self.http.session_idle_timeout,
            max_sessions=self.http.max_sessions,
            transport_security=self.http.transport_security,
            host=self.http.host,
        )

    async def run_streams(self, read_stream: Any, write_stream: Any) -> None:
        """Serve one connection over these streams (stdio's)."""
        await self.lowlevel.run(
            read_stream, write_stream, self.lowlevel.create_initialization_options()
        )

    def serve_tools(self, listed: Sequence[types.Tool], call: CallTool) -> None:
        """List `listed` and answer their calls with `call`, arguments unchecked by the SDK.
        Tools added the high-level way (`@server.tool`: the benchmarks' no-op floor) follow,
        and any other name is answered as the high-level server answers it."""
        names = {tool.name for tool in listed}

        async def list_all() -> list[types.Tool]:
            return [*listed, *await self.list_tools()]

        if MAJOR >= 2:
            _serve_on_v2(self, names, list_all, call)
        else:
            _serve_on_v1(self, names, list_all, call)


@asynccontextmanager
async def _connection_lifespan(_server: object) -> AsyncIterator[list[Callable[[], None]]]:
    closes: list[Callable[[], None]] = []
    try:
        yield closes
    finally:
        for close in closes:  # synchronous: the exit may run in a cancelled scope
            close()


def _sessionless(request: Request | None) -> bool:
    """Whether an HTTP request belongs to no session: any to a server run stateless (each
    request then has a session object of its own, made for it alone)."""
    return request is not None and "mcp-session-id" not in request.headers


def _serve_on_v1(server: Any, names: set[str], list_all: ListTools, call: CallTool) -> None:
    lowlevel = server.lowlevel

    async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
        if name not in names:
            return await server.call_tool(name, arguments)
        context = lowlevel.request_context
        if _sessionless(context.request):
            caller = Caller(None, None, context.request)
        else:
            caller = Caller(context.session, context.lifespan_context.append, context.request)
        return await call(caller, name, dict(arguments))

    lowlevel.list_tools()(list_all)
    lowlevel.call_tool(validate_input=False)(call_tool)


def _serve_on_v2(server: Any, names: set[str], list_all: ListTools, call: CallTool) -> None:
    async def list_tools(_context: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=await list_all())

    async def call_tool(context: Any, params: types.CallToolRequestParams) -> Any:
        if params.name not in names:
            return await server._handle_call_tool(context, params)
        if context.protocol_version in MODERN_PROTOCOL_VERSIONS or _sessionless(context.request):
            caller = Caller(None, None, context.request)
        else:
            # `context.session` is made anew for each request; the connection it speaks for
            # is the object that lasts (the SDK names it on the session only).
            connection = context.session._connection
            caller = Caller(connection, connection.exit_stack.callback, context.request)
        return await call(caller, params.name, dict(params.arguments or {}))

    server.lowlevel.add_request_handler("tools/list", types.PaginatedRequestParams, list_tools)
    server.lowlevel.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
