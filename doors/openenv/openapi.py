"""The OpenAPI document (`/docs`, `/openapi.json`) with what FastAPI leaves out of it: the
WebSocket session at `/ws`, where episodes live, and the models its messages carry."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from openenv.core.env_server.mcp_types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
)
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from doors.openenv.models import EpisodeObservation, SQLState

MESSAGE_MODELS: tuple[type[BaseModel], ...] = (
    CallToolAction,
    ListToolsAction,
    EpisodeObservation,
    CallToolObservation,
    ListToolsObservation,
    SQLState,
)

WEBSOCKET_SESSION = """\
One connection is one session holding one episode at a time (the typed client \
`doors.openenv.client.SQLEnvClient` speaks this protocol). Send JSON text frames:

* `{"type": "reset", "data": {"question_id"?, "db_id"?, "split"?, "dataset"?, "seed"?}}`: \
start an episode; answered with an `observation` frame whose `data.observation` is an \
`EpisodeObservation`.
* `{"type": "step", "data": CallToolAction}`, e.g. `{"type": "call_tool", "tool_name": "query", \
"arguments": {"sql": "SELECT ..."}}`: one tool call; answered with `data = {"observation": \
CallToolObservation, "reward", "done"}`. `{"type": "step", "data": ListToolsAction}` lists the \
tools (`ListToolsObservation`) and costs no step.
* `{"type": "state"}`: the episode's `SQLState`. `{"type": "close"}` ends the session.

Errors come as `{"type": "error", "data": {"message", "code"}}`; a full server answers \
`CAPACITY_REACHED` and closes the connection."""


def document_websocket(app: FastAPI) -> None:
    """Add `/ws` and the action, observation and state models to the app's OpenAPI document."""
    build_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build_openapi()
            _, definitions = models_json_schema(
                [(model, "validation") for model in MESSAGE_MODELS],
                ref_template="#/components/schemas/{model}",
            )
            schema.setdefault("components", {}).setdefault("schemas", {}).update(
                definitions["$defs"]
            )
            schema["paths"]["/ws"] = {"get": _websocket_operation()}
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi


def _websocket_operation() -> dict[str, Any]:
    return {
        "tags": ["Environment Control"],
        "summary": "WebSocket session: reset, step and state on one episode",
        "description": WEBSOCKET_SESSION,
        "operationId": "websocket_session",
        "responses": {"101": {"description": "Switching Protocols: the session is open."}},
    }
