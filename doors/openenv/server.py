"""The OpenEnv server: OpenEnv's own `create_app` over the engine's episode manager.

    sqlenv-openenv --host 0.0.0.0 --port 8000 --data-dir ../shared/data/spider

Settings come from the command line, else from their `SQLENV_*` variables (see
`env_core.settings`; for containers); ENABLE_WEB_INTERFACE=true (OpenEnv's own switch, or
`--web`) adds the `/web` page. Each WebSocket session holds one episode: `--max-episodes` is
OpenEnv's session limit, and `--idle-ttl` its session timeout; one client (remote address)
holds at most `--max-episodes-per-client` episodes at once, and a reset beyond them is an error.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import ConcurrencyConfig, HealthResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from doors.openenv.echoes import brief_detail, brief_errors
from doors.openenv.environment import SQLExploreEnvironment
from doors.openenv.guard import RequestGuard
from doors.openenv.models import EpisodeObservation, SQLState
from doors.openenv.openapi import document_websocket
from doors.openenv.web import PageRequests, build_play_ui, own_fonts
from env_core.factory import open_manager
from env_core.settings import Settings
from serving.garbage_collection import tune_for_serving
from serving.health import HEALTH_PATH, health_status
from serving.http_protocol import serve as serve_http
from serving.parent_watch import stop_with_parent

# Episodes held beyond the WebSocket sessions: the web page's one, and those of stateless
# POST /reset calls, which live only while the request runs.
EXTRA_EPISODES = 32
# Request bodies and WebSocket messages: an answer or SQL is at most tens of kilobytes.
MAX_MESSAGE_BYTES = 1 << 20
# uvicorn's WebSocket settings. Messages are not compressed (permessage-deflate): an
# observation is a few kilobytes, and compressing each one cost both ends CPU on every step and
# the server a compressor per connection (docs/profiles.md).
WEBSOCKET_OPTIONS = {"ws_max_size": MAX_MESSAGE_BYTES, "ws_per_message_deflate": False}


def build_app(settings: Settings) -> FastAPI:
    """The FastAPI app; `/web` is mounted when ENABLE_WEB_INTERFACE is true (OpenEnv's switch)."""
    # OpenEnv's reaper closes idle sessions' episodes after the same idle TTL; the engine's own
    # expiry only catches episodes whose session vanished uncleanly.
    manager = open_manager(settings, max_episodes=settings.max_episodes + EXTRA_EPISODES)
    manager.sandbox.warm()
    environment = functools.partial(SQLExploreEnvironment, manager)
    # OpenEnv names the factory in the error a client gets when it fails (when no thread can
    # start for the session, say); a partial would be shown with the manager's object address.
    environment.__name__ = SQLExploreEnvironment.__name__
    app = create_app(
        environment,
        CallToolAction,
        CallToolObservation,
        env_name="sqlenv",
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=settings.max_episodes,
            session_timeout=settings.idle_ttl_s,
        ),
        gradio_builder=build_play_ui,
        show_default_tab=False,
        title_override="sqlenv: SQL exploration",
        state_cls=SQLState,
        reset_observation_cls=EpisodeObservation,
    )
    document_websocket(app)
    serve_health(app, manager.sandbox.unavailable)

    if web_enabled():
        own_fonts(app)
        app.add_middleware(PageRequests)
    else:

        @app.get("/web", include_in_schema=False)
        def web_is_off() -> JSONResponse:
            message = (
                "the web page is off: start the server with --web (or ENABLE_WEB_INTERFACE=true)"
            )
            return JSONResponse({"detail": message}, status_code=404)

    @app.get(
        "/catalog",
        tags=["Environment Info"],
        summary="The split served, its fingerprint, and the episodes' step budget and rewards",
    )
    def catalog() -> dict[str, Any]:
        return manager.served()

    @app.get("/stats", tags=["Environment Info"], summary="Episodes held by the engine")
    def stats() -> dict[str, int]:
        return asdict(manager.stats())

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, error: RequestValidationError) -> JSONResponse:
        # FastAPI's own answer echoes every invalid value whole.
        return JSONResponse({"detail": brief_errors(error.errors())}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> Response:
        # OpenEnv's POST /step answers an invalid action with pydantic's errors, values whole.
        briefed = HTTPException(error.status_code, brief_detail(error.detail), error.headers)
        return await http_exception_handler(request, briefed)

    app.add_middleware(
        RequestGuard,
        max_body_bytes=MAX_MESSAGE_BYTES,
        per_client=settings.max_sessions_per_client,
        idle_unattached_s=settings.idle_session_timeout_s,
    )
    app.router.on_shutdown.append(manager.shutdown)
    return app


def serve_health(app: FastAPI, unavailable: Callable[[], str | None]) -> None:
    """OpenEnv's `/health`, which is always healthy, replaced by one that is not while the
    server cannot serve (its SQL workers cannot start, say; see `Sandbox.unavailable`), so that
    a load balancer or an orchestrator takes it out of service until it can."""
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != HEALTH_PATH]

    @app.get(
        HEALTH_PATH,
        response_model=HealthResponse,
        tags=["Health"],
        summary="Health check",
        description="Healthy (200), or unhealthy (503) while the server cannot serve, and why.",
        responses={503: {"description": "The server cannot serve now; `detail` says why."}},
    )
    def health() -> Response:
        reason = unavailable()
        status, code = health_status(reason)
        body = {"status": status} if reason is None else {"status": status, "detail": reason}
        return JSONResponse(body, status_code=code)


def web_enabled() -> bool:
    """OpenEnv's own switch for the /web page."""
    return os.environ.get("ENABLE_WEB_INTERFACE", "").lower() in ("1", "true", "yes")


def serve(settings: Settings, listener: socket.socket, web: bool = False) -> None:
    """Serve on the listening socket, with `/web` if asked (`doors.commands.openenv`)."""
    if web:
        os.environ["ENABLE_WEB_INTERFACE"] = "true"  # create_app reads only this switch
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    app = build_app(settings)
    tune_for_serving()
    stop_with_parent()
    url = f"http://{settings.host}:{settings.port}" + (" (and /web)" if web_enabled() else "")
    print(f"sqlenv-openenv: serving OpenEnv at {url}", file=sys.stderr, flush=True)
    serve_http(app, listener, settings, settings.log_level, **WEBSOCKET_OPTIONS)
