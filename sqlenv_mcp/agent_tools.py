"""Tools declared by their ready schemas and called with the agent's arguments exactly as sent.

Each tool is declared with the JSON schemas the engine (or the door, for its own tools) already
holds: no Python signature stands in for them. Its calls reach its handler unchecked by the SDK
(served on the low-level server, see `sqlenv_mcp.sdk`; the high-level server's own tools would be
checked by pydantic, which drops names a tool does not take and answers a wrong type in its own
words): the engine
checks every name, type and range and answers a mistake in its own words, as through every door.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from mcp.types import INVALID_PARAMS, CallToolResult, Tool, ToolAnnotations

from env_core.command_line import PACKAGE
from env_core.errors import InvalidArgumentError, SQLEnvError, shown
from env_core.tools import ToolSpec
from sqlenv_mcp.results import Output
from sqlenv_mcp.sdk import (
    SDK_DEFAULTS,
    Caller,
    HttpOptions,
    SdkServer,
    protocol_error,
    without_output_schema,
)
from sqlenv_mcp.stdio import stdio_streams

# A tool's work: who calls it and the arguments as sent, to the result.
Handler = Callable[[Caller, dict[str, Any]], Awaitable[CallToolResult]]
# The MCP specification's code for a resource that does not exist.
RESOURCE_NOT_FOUND = -32002

READ_ONLY = ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False)
ANSWERING = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False
)


@dataclass(frozen=True)
class AgentTool:
    """One tool as the server lists it, and the handler that answers its calls."""

    declaration: Tool
    handler: Handler


def declared(
    name: str,
    description: str,
    parameters: dict[str, Any],
    annotations: ToolAnnotations,
    output: type[Output],
) -> Tool:
    """A tool's declaration; `output`: the model of its structured result."""
    return Tool(
        name=name,
        description=description,
        inputSchema=parameters,
        outputSchema=output.model_json_schema(),
        annotations=annotations,
    )


def engine_tool(
    spec: ToolSpec, own: dict[str, dict[str, Any]], output: type[Output], handler: Handler
) -> AgentTool:
    """An engine tool with the door's `own` optional parameters beside its parameters,
    annotated by whether it only reads."""
    parameters = spec.parameters | {"properties": spec.parameters["properties"] | own}
    annotations = READ_ONLY if spec.read_only else ANSWERING
    return AgentTool(
        declared(spec.name, spec.description, parameters, annotations, output), handler
    )


class AgentToolServer(SdkServer):
    def __init__(
        self,
        name: str,
        *,
        instructions: str | None = None,
        http: HttpOptions = SDK_DEFAULTS,
    ) -> None:
        # Named with the package's version; without it, clients see the SDK's.
        super().__init__(name, instructions=instructions, version=version(PACKAGE), http=http)

    async def run_stdio_async(self) -> None:
        """Serve over stdio with each line screened first (see `sqlenv_mcp.stdio`)."""
        async with stdio_streams() as (read_stream, write_stream):
            await self.run_streams(read_stream, write_stream)

    def serve_tools(self, tools: Sequence[AgentTool], output_schemas: bool = True) -> None:
        """List these tools, in this order, and answer their calls (see the module's note);
        without `output_schemas`, they are listed with none (`--no-output-schemas`)."""
        listed = [
            tool.declaration if output_schemas else without_output_schema(tool.declaration)
            for tool in tools
        ]
        handlers = {tool.declaration.name: tool.handler for tool in tools}

        async def call(caller: Caller, name: str, arguments: dict[str, Any]) -> CallToolResult:
            return await handlers[name](caller, arguments)

        super().serve_tools(listed, call)

    # The high-level server answers an unknown resource or prompt with error code 0 (and logs
    # a traceback for the prompt); the specification's codes are these.
    async def read_resource(self, uri: Any, *context: Any) -> Any:
        known = [str(resource.uri) for resource in await self.list_resources()]
        if str(uri) not in known:
            raise protocol_error(RESOURCE_NOT_FOUND, _unknown("resource", str(uri), known))
        return await super().read_resource(uri, *context)

    async def get_prompt(self, name: str, arguments: Any = None, *context: Any) -> Any:
        known = [prompt.name for prompt in await self.list_prompts()]
        if name not in known:
            raise protocol_error(INVALID_PARAMS, _unknown("prompt", name, known))
        return await super().get_prompt(name, arguments, *context)


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
