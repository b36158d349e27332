"""JSON-RPC messages the MCP SDK would answer wrongly or not at all, answered in its place.

Both transports (stdio and HTTP) `screen` each message before the SDK is given it: it is read
within `serving.json_limits`, and one the SDK would mishandle is answered here. Left to it:

- over stdio, a line that is not a JSON-RPC message got a log notification ("Internal Server
  Error") rather than an error response, so the client never learned what was wrong;
- over HTTP, a message that is not a JSON-RPC object got pydantic's errors in full as -32602;
- a request whose id is neither a string nor a whole number (1.5, null, an object) was taken
  for a notification and never answered;
- an unknown method got -32602 (invalid params) rather than -32601, params a method does not
  take got -32602 without saying what was wrong, and each of these, as each unknown or invalid
  notification, wrote ~60 lines to the server's log: a few bytes sent, kilobytes logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from env_core.errors import shortened, shown
from serving import json_limits
from serving.asgi import INVALID_REQUEST, PARSE_ERROR, rpc_error
from sqlenv_mcp.sdk import CLIENT_NOTIFICATIONS, CLIENT_REQUESTS, malformed_for_its_version

METHOD_NOT_FOUND, INVALID_PARAMS = -32601, -32602
MAX_PROBLEM_CHARS = 200

NOT_AN_OBJECT = "a message must be one JSON-RPC 2.0 object (a batch, an array, is not accepted)"
NOT_2_0 = 'a message must have "jsonrpc": "2.0"'
METHOD_NOT_TEXT = "a message's method must be a string"
BAD_ID = "a request id must be a string or a whole number"
PARAMS_NOT_AN_OBJECT = "params must be an object"
NOT_A_RESPONSE = "a message without a method must be a response: an id, and a result or an error"


def _models(union: Any) -> dict[str, type[BaseModel]]:
    """The SDK's message model of each method of a union of them."""
    return {
        method: model
        for model in get_args(union)
        for method in get_args(model.model_fields["method"].annotation)
    }


REQUESTS = _models(CLIENT_REQUESTS)
NOTIFICATIONS = _models(CLIENT_NOTIFICATIONS)


@dataclass(frozen=True)
class Screened:
    """A message as `screen` found it: for the SDK (`message`, parsed), answered here with
    `error`, or `ignored`: a notification the SDK does not know, dropped unanswered (JSON-RPC
    answers no notification)."""

    message: Any = None
    error: dict[str, Any] | None = None
    ignored: bool = False


def screen(data: bytes) -> Screened:
    """What to do with one message as received."""
    try:
        message = json_limits.read(data)
    except json_limits.Unreadable as why:
        return Screened(error=rpc_error(None, PARSE_ERROR, str(why)))
    except ValueError as error:
        return Screened(error=rpc_error(None, PARSE_ERROR, f"a message must be JSON ({error})"))
    error = _refusal(message)
    if error is not None:
        return Screened(error=error)
    if "method" in message and "id" not in message:
        model = NOTIFICATIONS.get(message["method"])
        return Screened(
            message,
            ignored=model is None
            or _invalid_params(model, message) is not None
            or malformed_for_its_version(message),
        )
    return Screened(message)


def _refusal(message: Any) -> dict[str, Any] | None:
    """The JSON-RPC error answering `message` (as parsed) in the SDK's place, or None. Its id
    is the request's when the request names one the SDK could answer, else null."""
    if not isinstance(message, dict):
        return _invalid(NOT_AN_OBJECT)
    if message.get("jsonrpc") != "2.0":
        return _invalid(NOT_2_0)
    if "method" not in message:
        has_outcome = ("result" in message) != ("error" in message)
        return None if has_outcome and _valid_id(message.get("id")) else _invalid(NOT_A_RESPONSE)
    method = message["method"]
    if not isinstance(method, str):
        return _invalid(METHOD_NOT_TEXT)
    if "id" not in message:
        return None  # a notification, never answered
    request_id = message["id"]
    if not _valid_id(request_id):
        return _invalid(BAD_ID)
    model = REQUESTS.get(method)
    if model is None:
        return rpc_error(request_id, METHOD_NOT_FOUND, f"unknown method {shown(method)}")
    if not isinstance(message.get("params", {}), dict | None):
        return rpc_error(request_id, INVALID_PARAMS, PARAMS_NOT_AN_OBJECT)
    problem = _invalid_params(model, message)
    if problem is not None:
        return rpc_error(request_id, INVALID_PARAMS, f"{method}: {problem}")
    return None


def _invalid_params(model: type[BaseModel], message: dict[str, Any]) -> str | None:
    """What is wrong with a message's params for its method (the first of pydantic's errors,
    cut short), or None."""
    fields = {name: message[name] for name in ("method", "params") if name in message}
    try:
        model.model_validate(fields)
    except ValidationError as error:
        first, *rest = error.errors(include_url=False, include_input=False)
        where = ".".join(map(str, first["loc"]))
        more = f" (and {len(rest)} more)" if rest else ""
        return shortened(f"{where}: {first['msg']}", MAX_PROBLEM_CHARS) + more
    return None


def _valid_id(request_id: object) -> bool:
    return isinstance(request_id, str) or (
        isinstance(request_id, int) and not isinstance(request_id, bool)
    )


def _invalid(message: str) -> dict[str, Any]:
    return rpc_error(None, INVALID_REQUEST, message)
