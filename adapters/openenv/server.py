"""The OpenEnv server: OpenEnv's own `create_app` over the engine's session manager.

    sqlenv-openenv --host 0.0.0.0 --port 8000 --data-dir ../shared/data/spider

Settings come from the command line, else from their `SQLENV_*` variables (see
`env_core.settings`; for containers); ENABLE_WEB_INTERFACE=true (OpenEnv's own switch, or
`--web`) adds the `/web` page. Each WebSocket session holds one episode: `--max-episodes` is
OpenEnv's session limit, and `--idle-ttl` its session timeout.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
from dataclasses import asdict

import uvicorn
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import ConcurrencyConfig

from adapters.openenv.environment import SQLExploreEnvironment
from adapters.openenv.guard import RequestGuard
from adapters.openenv.models import EpisodeObservation, SQLState
from adapters.openenv.openapi import document_websocket
from adapters.openenv.web import build_play_ui
from env_core.errors import shown
from env_core.factory import open_sessions
from env_core.parent_watch import stop_with_parent
from env_core.settings import Settings, add_arguments

log = logging.getLogger("adapters.openenv")

# Episodes held beyond the WebSocket sessions: the web page's one, and those of stateless
# POST /reset calls, which live only while the request runs.
EXTRA_EPISODES = 32
# Request bodies and WebSocket messages: an answer or SQL is at most tens of kilobytes.
MAX_MESSAGE_BYTES = 1 << 20


def build_app(settings: Settings) -> FastAPI:
    """The FastAPI app; `/web` is mounted when ENABLE_WEB_INTERFACE is true (OpenEnv's switch)."""
    # OpenEnv's reaper closes idle sessions' episodes after the same idle TTL; the engine's own
    # expiry only catches episodes whose session vanished uncleanly.
    manager = open_sessions(settings, max_episodes=settings.max_episodes + EXTRA_EPISODES)
    app = create_app(
        functools.partial(SQLExploreEnvironment, manager),
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

    @app.get("/stats", tags=["Environment Info"], summary="Episodes held by the engine")
    def stats() -> dict[str, int]:
        return asdict(manager.stats())

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, error: RequestValidationError) -> JSONResponse:
        # FastAPI's own answer echoes every invalid value whole.
        errors = [{**item, "input": shown(item.get("input"))} for item in error.errors()]
        return JSONResponse({"detail": jsonable_encoder(errors)}, status_code=422)

    app.add_middleware(
        RequestGuard,
        max_body_bytes=MAX_MESSAGE_BYTES,
        per_client=settings.max_connections_per_client,
        idle_unattached_s=settings.idle_connection_timeout_s,
    )
    app.router.on_shutdown.append(manager.shutdown)
    return app


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sqlenv-openenv",
        description="Serve the sqlenv SQL-exploration environment with OpenEnv (WebSocket /ws, "
        "HTTP /reset /step /state, JSON-RPC /mcp; /web with --web).",
    )
    parser.add_argument(
        "--web",
        action="store_true",
        default=os.environ.get("ENABLE_WEB_INTERFACE", "").lower() in ("1", "true", "yes"),
        help="serve the /web page too (default: $ENABLE_WEB_INTERFACE)",
    )
    add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    settings = Settings.from_arguments(args)
    if args.web:
        os.environ["ENABLE_WEB_INTERFACE"] = "true"  # create_app reads only this switch
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    app = build_app(settings)
    stop_with_parent()
    log.info("serving sqlenv on http://%s:%d", settings.host, settings.port)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        ws_max_size=MAX_MESSAGE_BYTES,
    )


if __name__ == "__main__":
    main()
