"""What the OpenEnv server's errors echo of a client's input, cut short.

OpenEnv and FastAPI answer bad input with messages and pydantic validation errors that repeat
the input whole: a 900 KB message type, key or id comes back as a 900 KB error. Every such
error goes through these functions, so that it repeats at most an excerpt of what it was sent:
`server.py`'s exception handlers for HTTP errors, and, put in by `guard.py`, `briefed_frame`
for WebSocket frames and `briefing_json_rpc` for `POST /mcp` responses.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from env_core.errors import shortened, shown
from serving.asgi import Message, Send

MAX_MESSAGE_CHARS = 300
MAX_KEY_CHARS = 40
MAX_ERRORS = 5
# WebSocket frames in which OpenEnv may echo input: its errors and JSON-RPC responses, on /ws
# (whose messages pydantic serialises compactly, `type` first) and on /mcp.
ECHOING_FRAMES = ('{"type":"error"', '{"type":"mcp"', '{"jsonrpc"')


def brief_errors(errors: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The first MAX_ERRORS of pydantic's validation errors, with the input, the location
    (keys the client chose) and the message each repeats cut short."""
    return [
        {
            "type": error.get("type"),
            "loc": [
                part if isinstance(part, int) else shortened(str(part), MAX_KEY_CHARS)
                for part in error.get("loc", ())
            ],
            "msg": shortened(str(error.get("msg", "")), MAX_MESSAGE_CHARS),
            "input": shown(error.get("input")),
        }
        for error in errors[:MAX_ERRORS]
    ]


def brief_error(error: Mapping[str, Any]) -> dict[str, Any]:
    """An error object (the data of OpenEnv's WebSocket error frame, or a JSON-RPC error) with
    its message, and its validation errors if any, cut short."""
    briefed = {**error, "message": shortened(str(error.get("message", "")), MAX_MESSAGE_CHARS)}
    if isinstance(error.get("errors"), list):
        briefed["errors"] = brief_errors(error["errors"])
    return briefed


def brief_detail(detail: Any) -> Any:
    """An HTTP error's detail (pydantic's validation errors, or a message) cut short."""
    if isinstance(detail, list):
        return brief_errors(detail)
    return shortened(detail, MAX_MESSAGE_CHARS) if isinstance(detail, str) else detail


def briefed_frame(text: str) -> str:
    """A WebSocket frame OpenEnv sent (one of `ECHOING_FRAMES`) with what it repeats of the
    input cut short."""
    frame = json.loads(text)
    if frame.get("type") == "error":
        return json.dumps({**frame, "data": brief_error(frame["data"])})
    if frame.get("type") == "mcp":
        return json.dumps({**frame, "data": _briefed_rpc(frame["data"])})
    return json.dumps(_briefed_rpc(frame))


def briefing_json_rpc(send: Send) -> Send:
    """A `POST /mcp` send that cuts a JSON-RPC error short. OpenEnv sends the response's body
    in one message; the response's start is held until the body's length is known."""
    held: list[Message] = []

    async def briefing(message: Message) -> None:
        if message["type"] == "http.response.start":
            held.append(message)
            return
        if message["type"] == "http.response.body" and held:
            start = held.pop()
            if not message.get("more_body", False):
                body = _briefed_body(message.get("body", b""))
                headers = [(k, v) for k, v in start["headers"] if k != b"content-length"]
                start = {**start, "headers": [*headers, (b"content-length", b"%d" % len(body))]}
                message = {**message, "body": body}
            await send(start)
        await send(message)

    return briefing


def _briefed_body(body: bytes) -> bytes:
    with contextlib.suppress(ValueError):
        response = json.loads(body)
        if isinstance(response, dict):
            return json.dumps(_briefed_rpc(response)).encode()
    return body


def _briefed_rpc(response: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC response with its error, if it has one, cut short."""
    error = response.get("error")
    return {**response, "error": brief_error(error)} if isinstance(error, dict) else response
