"""Tools that receive the agent's arguments exactly as sent.

FastMCP checks a tool's arguments with pydantic before the tool runs: it drops names the tool
does not take, and answers a wrong type with pydantic's text ("1 validation error for
sampleArguments ..."). The episode and explorer tools are declared with typed signatures, so
hosts see their schemas, but are called with the arguments as sent: the engine checks every
name, type and range and answers a mistake in its own words, as it does through every door.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from importlib.metadata import version
from typing import Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.shared.exceptions import McpError
from mcp.types import (
    INVALID_PARAMS,
    CallToolResult,
    ContentBlock,
    ErrorData,
    GetPromptResult,
    ToolAnnotations,
)
from pydantic import AnyUrl

from env_core.command_line import PACKAGE
from env_core.errors import InvalidArgumentError, SQLEnvError, shown
from sqlenv_mcp.stdio import stdio_streams

# A tool's work: the calling context and the arguments as sent, to the result.
Handler = Callable[[Context, dict[str, Any]], Awaitable[CallToolResult]]
# The MCP specification's code for a resource that does not exist.
RESOURCE_NOT_FOUND = -32002


class AgentToolServer(FastMCP):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._handlers: dict[str, Handler] = {}
        # FastMCP gives no way to name the server's version; without it, clients see the SDK's.
        self._mcp_server.version = version(PACKAGE)

    async def run_stdio_async(self) -> None:
        """Serve over stdio with each line screened first (see `sqlenv_mcp.stdio`)."""
        async with stdio_streams() as (read_stream, write_stream):
            server = self._mcp_server
            await server.run(read_stream, write_stream, server.create_initialization_options())

    def add_agent_tool(
        self,
        declaration: Callable[..., Any],
        handler: Handler,
        *,
        name: str,
        description: str,
        annotations: ToolAnnotations,
        structured_output: bool,
    ) -> None:
        """Add a tool whose schema `declaration`'s signature gives and whose calls `handler`
        makes."""
        self.add_tool(
            declaration,
            name=name,
            description=description,
            annotations=annotations,
            structured_output=structured_output,
        )
        self._handlers[name] = handler

    async def call_tool(
        self, name: str, arguments: dict[str, Any]
    ) -> Sequence[ContentBlock] | dict[str, Any] | CallToolResult:
        handler = self._handlers.get(name)
        if handler is None:
            return await super().call_tool(name, arguments)
        return await handler(self.get_context(), dict(arguments or {}))

    # FastMCP answers an unknown resource or prompt with error code 0 (and logs a traceback
    # for the prompt); the specification's codes are these.
    async def read_resource(self, uri: AnyUrl | str) -> Iterable[ReadResourceContents]:
        known = [str(resource.uri) for resource in await self.list_resources()]
        if str(uri) not in known:
            message = _unknown("resource", str(uri), known)
            raise McpError(ErrorData(code=RESOURCE_NOT_FOUND, message=message))
        return await super().read_resource(uri)

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None
    ) -> GetPromptResult:
        known = [prompt.name for prompt in await self.list_prompts()]
        if name not in known:
            raise McpError(ErrorData(code=INVALID_PARAMS, message=_unknown("prompt", name, known)))
        return await super().get_prompt(name, arguments)


def _unknown(kind: str, name: str, known: list[str]) -> str:
    return f"unknown {kind} {shown(name)}: the {kind}s are {', '.join(known) or 'none'}"


KIND_NAMES = {str: "a string", bool: "true or false", int: "a whole number"}


def take(
    arguments: dict[str, Any],
    name: str,
    kind: type,
    error: type[SQLEnvError] = InvalidArgumentError,
) -> Any:
    """Remove an optional argument from the arguments, checked to be of `kind` (else `error`);
    None when it was not given."""
    value = arguments.pop(name, None)
    if value is not None and type(value) is not kind:
        raise error(f"{name} must be {KIND_NAMES[kind]}, not {shown(value)}")
    return value
