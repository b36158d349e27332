"""The OpenEnv server: OpenEnv's own `create_app` over the engine's session manager.

    sqlenv-openenv --host 0.0.0.0 --port 8000 --data-dir ../shared/data/spider

Settings come from the command line, else from environment variables (for containers):
SQLENV_DATA_DIR, SQLENV_SPLIT, SQLENV_CACHE_DIR, MAX_CONCURRENT_ENVS, SQLENV_SESSION_TIMEOUT_S,
SQLENV_MAX_STEPS, SQLENV_REWARD_PROFILE; ENABLE_WEB_INTERFACE=true adds the `/web` page.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path

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
from env_core.rewards import PROFILES

log = logging.getLogger("adapters.openenv")

# Episodes held beyond the WebSocket sessions: the web page's one, and those of stateless
# POST /reset calls, which live only while the request runs.
EXTRA_EPISODES = 32
# Request bodies and WebSocket messages: an answer or SQL is at most tens of kilobytes.
MAX_MESSAGE_BYTES = 1 << 20


@dataclass(frozen=True)
class ServerSettings:
    data_dir: str | None = None
    split: str = "dev"
    cache_dir: Path | None = None
    max_sessions: int = 64
    # Finite on purpose: without it OpenEnv never reaps half-open sockets, which then hold
    # their slots for ever. Long enough for a slow training step between two tool calls.
    session_timeout_s: float = 900.0
    max_steps: int = 15
    reward_profile: str = "shaped"
    query_timeout_s: float = 2.0
    sql_workers: int = 4
    sql_memory_mb: int = 64
    # Fair use (see adapters.openenv.guard).
    max_connections_per_client: int = 64
    idle_connection_timeout_s: float = 120.0

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> ServerSettings:
        cache_dir = environ.get("SQLENV_CACHE_DIR")
        return cls(
            data_dir=environ.get("SQLENV_DATA_DIR") or None,
            split=environ.get("SQLENV_SPLIT", cls.split),
            cache_dir=Path(cache_dir) if cache_dir else None,
            max_sessions=int(environ.get("MAX_CONCURRENT_ENVS", cls.max_sessions)),
            session_timeout_s=float(environ.get("SQLENV_SESSION_TIMEOUT_S", cls.session_timeout_s)),
            max_steps=int(environ.get("SQLENV_MAX_STEPS", cls.max_steps)),
            reward_profile=environ.get("SQLENV_REWARD_PROFILE", cls.reward_profile),
        )


def build_app(settings: ServerSettings) -> FastAPI:
    """The FastAPI app; `/web` is mounted when ENABLE_WEB_INTERFACE is true (OpenEnv's switch)."""
    manager = open_sessions(
        settings.data_dir,
        split=settings.split,
        cache_dir=settings.cache_dir,
        max_steps=settings.max_steps,
        max_sessions=settings.max_sessions + EXTRA_EPISODES,
        # The same timeout as OpenEnv's reaper, which closes idle sessions' episodes itself;
        # the engine's own expiry only catches episodes whose session vanished uncleanly.
        idle_ttl_s=settings.session_timeout_s,
        reward_profile=settings.reward_profile,
        query_timeout_s=settings.query_timeout_s,
        sql_workers=settings.sql_workers,
        sql_memory_mb=settings.sql_memory_mb,
    )
    app = create_app(
        functools.partial(SQLExploreEnvironment, manager),
        CallToolAction,
        CallToolObservation,
        env_name="sqlenv",
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=settings.max_sessions,
            session_timeout=settings.session_timeout_s,
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


def build_parser(defaults: ServerSettings) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sqlenv-openenv",
        description="Serve the sqlenv SQL-exploration environment with OpenEnv (WebSocket /ws, "
        "HTTP /reset /step /state, JSON-RPC /mcp; /web with ENABLE_WEB_INTERFACE=true).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (8000)")
    parser.add_argument(
        "--data-dir",
        default=defaults.data_dir,
        help="Spider-format data directory (default: $SQLENV_DATA_DIR, else the embedded demo)",
    )
    parser.add_argument("--split", default=defaults.split, help="question split to serve")
    parser.add_argument("--cache-dir", type=Path, default=defaults.cache_dir)
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=defaults.max_sessions,
        help="concurrent sessions (default: $MAX_CONCURRENT_ENVS, else 64)",
    )
    parser.add_argument(
        "--session-timeout",
        type=float,
        default=defaults.session_timeout_s,
        help="seconds an idle session lives (default: $SQLENV_SESSION_TIMEOUT_S, else 900)",
    )
    parser.add_argument("--max-steps", type=int, default=defaults.max_steps)
    parser.add_argument(
        "--reward-profile", choices=sorted(PROFILES), default=defaults.reward_profile
    )
    parser.add_argument("--query-timeout", type=float, default=defaults.query_timeout_s)
    parser.add_argument("--sql-workers", type=int, default=defaults.sql_workers)
    parser.add_argument("--sql-memory", type=int, default=defaults.sql_memory_mb)
    parser.add_argument(
        "--max-connections-per-client",
        type=int,
        default=defaults.max_connections_per_client,
        metavar="N",
        help="WebSockets and HTTP-created sessions one client (remote address) may hold "
        f"({defaults.max_connections_per_client})",
    )
    parser.add_argument(
        "--idle-connection-timeout",
        type=float,
        default=defaults.idle_connection_timeout_s,
        metavar="SECONDS",
        help="a session created over HTTP with no WebSocket attached closes after this long "
        f"idle ({defaults.idle_connection_timeout_s:g})",
    )
    parser.add_argument("--web", action="store_true", help="serve the /web page too")
    parser.add_argument("--log-level", default="warning", help="uvicorn log level (warning)")
    return parser


def main(argv: list[str] | None = None) -> None:
    defaults = ServerSettings.from_environment()
    args = build_parser(defaults).parse_args(argv)
    if args.web:
        os.environ["ENABLE_WEB_INTERFACE"] = "true"  # create_app reads only this switch
    settings = replace(
        defaults,
        data_dir=args.data_dir,
        split=args.split,
        cache_dir=args.cache_dir,
        max_sessions=args.max_sessions,
        session_timeout_s=args.session_timeout,
        max_steps=args.max_steps,
        reward_profile=args.reward_profile,
        query_timeout_s=args.query_timeout,
        sql_workers=args.sql_workers,
        sql_memory_mb=args.sql_memory,
        max_connections_per_client=args.max_connections_per_client,
        idle_connection_timeout_s=args.idle_connection_timeout,
    )
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    app = build_app(settings)
    stop_with_parent()
    log.info("serving sqlenv on http://%s:%d", args.host, args.port)
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        ws_max_size=MAX_MESSAGE_BYTES,
    )


if __name__ == "__main__":
    main()
