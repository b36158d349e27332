"""MCP over stdio, each line screened (`sqlenv_mcp.jsonrpc`) before the SDK is given it.

The SDK's own stdio transport reads a line whole however long it is, and gives the server an
exception for a line it cannot read, which the server answers with a log notification rather
than an error. Here a line may be at most `MAX_LINE_BYTES` (the HTTP transport's body limit),
and a line the SDK must not be given is answered with a JSON-RPC error, written to stdout in
turn with the SDK's own messages. A blank line is skipped. When the client stops reading
stdout, the server stops, without the traceback the SDK's transport logged.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, BinaryIO

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from serving.asgi import INVALID_REQUEST, rpc_error
from sqlenv_mcp.jsonrpc import screen
from sqlenv_mcp.sdk import MAX_REQUEST_BYTES, message_json, parse_message

MAX_LINE_BYTES = MAX_REQUEST_BYTES
LINE_TOO_LONG = f"a message may be at most {MAX_LINE_BYTES:,} bytes long"
NOT_A_MESSAGE = "not a JSON-RPC 2.0 message"

# What the writer is given: the SDK's messages, and the errors answered here (plain JSON).
Outgoing = SessionMessage | dict[str, Any]


@asynccontextmanager
async def stdio_streams() -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage], MemoryObjectSendStream[SessionMessage]]
]:
    """The server's read and write streams over this process's stdin and stdout, as the SDK's
    `stdio_server` gives them."""
    source = sys.stdin.buffer
    sink = anyio.wrap_file(sys.stdout.buffer)
    to_server, read_stream = anyio.create_memory_object_stream[SessionMessage](0)
    write_stream, outgoing = anyio.create_memory_object_stream[Outgoing](0)
    answers = write_stream.clone()

    async def read() -> None:
        async with to_server, answers:
            async for line in _lines(source):
                if line is None:
                    await answers.send(rpc_error(None, INVALID_REQUEST, LINE_TOO_LONG))
                elif line.strip():
                    await _take(line, to_server, answers)

    async def write() -> None:
        async with outgoing:
            async for item in outgoing:
                if isinstance(item, SessionMessage):
                    text = message_json(item.message)
                else:
                    text = json.dumps(item)
                try:
                    await sink.write(text.encode() + b"\n")
                    await sink.flush()
                except BrokenPipeError:  # the client stopped reading: the server stops quietly
                    tasks.cancel_scope.cancel()
                    return

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        yield read_stream, write_stream


async def _take(
    line: bytes,
    to_server: MemoryObjectSendStream[SessionMessage],
    answers: MemoryObjectSendStream[Outgoing],
) -> None:
    """Give the server one line's message, or answer it."""
    screened = screen(line)
    if screened.error is not None:
        await answers.send(screened.error)
    elif not screened.ignored:
        try:
            message = parse_message(screened.message)
        except (
            ValidationError
        ):  # a shape `screen` does not name, such as a result that is no object
            await answers.send(rpc_error(None, INVALID_REQUEST, NOT_A_MESSAGE))
        else:
            await to_server.send(SessionMessage(message))


async def _lines(source: BinaryIO) -> AsyncIterator[bytes | None]:
    """Each line of `source`, or None for one over `MAX_LINE_BYTES` (its rest is skipped)."""
    while line := await _read_line(source, MAX_LINE_BYTES + 1):
        if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
            yield line
            continue
        while (rest := await _read_line(source, MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
            pass
        yield None


async def _read_line(source: BinaryIO, limit: int) -> bytes:
    """At most `limit` bytes of a line; the wait for them is abandoned if the server stops."""
    return await anyio.to_thread.run_sync(source.readline, limit, abandon_on_cancel=True)
