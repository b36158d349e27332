"""`sqlenv-mcp`: serve the sqlenv tools over MCP (stdio by default, or streamable HTTP)."""

import argparse
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from env_core.command_line import CommandError, CommandParser, run_main
from env_core.factory import open_manager
from env_core.manager import executor_limits
from env_core.sandbox import Sandbox
from env_core.settings import Settings, add_arguments
from serving.asgi import listening_socket
from serving.parent_watch import stop_with_parent
from sqlenv_mcp.agent_tools import AgentToolServer
from sqlenv_mcp.assessment import Assessment, Seat, Seats, routed_seat
from sqlenv_mcp.episodes import Sessions
from sqlenv_mcp.explorer import UserDatabases
from sqlenv_mcp.server import (
    HttpSettings,
    build_assessment_server,
    build_episode_server,
    build_explorer_server,
    http_app,
)

TOKEN_VARIABLE = "SQLENV_MCP_TOKEN"


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="sqlenv-mcp",
        description="Serve the sqlenv SQL-exploration tools over MCP. Episode mode (default): "
        "questions about hidden-schema databases, with start_episode, describe, sample, query, "
        "answer and end_episode. Explorer mode (--db): safe read-only describe/sample/query on "
        "your own SQLite files.",
    )
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default; for Claude Desktop, Claude Code, Cursor, VS Code) or streamable "
        "HTTP at /mcp",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="extra Host header to accept over HTTP (repeatable). DNS-rebinding protection is "
        "always on: only localhost names pass unless listed here, e.g. sql.example.org:*",
    )
    parser.add_argument(
        "--stateless",
        action="store_true",
        help="over HTTP, serve each request on its own, with no MCP session: a call names its "
        "episode by the episode_id start_episode gave, so replicas need no sticky sessions",
    )
    parser.add_argument(
        "--auth-token",
        default=os.environ.get(TOKEN_VARIABLE),
        help=f"require 'Authorization: Bearer TOKEN' on HTTP (default: ${TOKEN_VARIABLE})",
    )
    parser.add_argument(
        "--db",
        type=database_path,
        help="explorer mode: a SQLite file, or a folder of them, served read-only without "
        "questions or grading",
    )
    parser.add_argument(
        "--assess",
        type=question_ids,
        metavar="QUESTION_ID[,QUESTION_ID...]",
        help="assessment mode: serve these questions, each once, as assigned episodes the agent "
        "cannot choose or restart (one answer each); over HTTP each has its own address, "
        "printed at start; over stdio give one question. Outcomes are logged to stderr",
    )
    parser.add_argument(
        "--no-output-schemas",
        dest="output_schemas",
        action="store_false",
        help="leave output schemas out of the tool list (results still carry structured "
        "content); the Python MCP client then skips a JSON-schema check it makes on every call",
    )
    add_arguments(parser)
    return parser


def question_ids(text: str) -> tuple[str, ...]:
    ids = tuple(part.strip() for part in text.split(",") if part.strip())
    if not ids:
        raise argparse.ArgumentTypeError("give one question id or more, such as dev:12")
    return ids


def database_path(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path names no database; give a file or folder")
    return Path(text)


@dataclass(frozen=True)
class Served:
    """What a command line serves: the MCP server, which of its HTTP sessions are in use
    (see `sqlenv_mcp.guard`) and, in assessment mode, the assessment and its seats."""

    server: AgentToolServer
    in_use: Callable[[str], bool] = lambda _session_id: True
    seats: Seats | None = None
    assigned: tuple[Seat, ...] = ()
    server_id: str | None = None  # the id its episode handles name (`sqlenv_mcp.handles`)


def http_settings(args: argparse.Namespace) -> HttpSettings:
    return HttpSettings(Settings.from_arguments(args), tuple(args.allowed_host), args.stateless)


def build_server(args: argparse.Namespace) -> Served:
    """What the parsed command line serves; raises SQLEnvError on bad data."""
    http = http_settings(args)
    settings = http.settings
    check_modes(args)
    if args.db:
        limits = executor_limits(settings)
        sandbox = Sandbox(settings.sql_workers, settings.sql_memory_mb)
        databases = UserDatabases.from_path(args.db, limits, sandbox)
        sandbox.warm()
        return Served(build_explorer_server(databases, http, args.output_schemas))
    manager = open_manager(settings)
    manager.start_reaper()
    manager.sandbox.warm()
    if args.assess:
        seats = Seats()
        assessment = Assessment(manager, seats)
        assigned = tuple(assessment.assign(question_id) for question_id in args.assess)
        seat_of = routed_seat(seats) if args.transport == "http" else lambda _ctx: assigned[0]
        server = build_assessment_server(
            seats,
            manager.tools,
            seat_of,
            http,
            args.output_schemas,
            unavailable=manager.sandbox.unavailable,
        )
        return Served(server, seats=seats, assigned=assigned)
    sessions = Sessions(manager)
    server = build_episode_server(manager, http, args.output_schemas, sessions)
    return Served(server, sessions.holds_episode, server_id=sessions.handles.server)


def check_modes(args: argparse.Namespace) -> None:
    if args.db and args.data_dir_given:
        raise CommandError("--db serves your own files; it does not go with --data-dir")
    if args.assess and args.db:
        raise CommandError("--assess serves questions; it does not go with --db")
    if args.assess and args.route_by_episode_id:
        raise CommandError(
            "--assess keeps each episode to its own address; drop --route-by-episode-id"
        )
    if args.stateless and (args.transport != "http" or args.assess):
        raise CommandError("--stateless is for episode or explorer mode over --transport http")
    if args.assess and args.transport == "stdio" and len(args.assess) > 1:
        raise CommandError(
            "over stdio --assess serves one question; give one, or use --transport http"
        )


def serve(served: Served, args: argparse.Namespace) -> None:
    if args.transport == "stdio":
        served.server.run("stdio")
        return
    from serving.http_protocol import serve as serve_http

    stop_with_parent()
    http = http_settings(args)
    host, port = http.settings.host, http.settings.port
    listener = listening_socket(host, port)
    app = http_app(
        served.server, http, args.auth_token, served.in_use, served.seats, served.server_id
    )
    base = f"http://{host}:{port}"
    if served.seats is None:
        print(f"sqlenv-mcp: serving MCP at {base}/mcp", file=sys.stderr, flush=True)
    for seat in served.assigned:
        address = f"{base}/assess/{seat.token}/mcp"
        print(f"sqlenv-mcp: assessing {seat.question_id} at {address}", file=sys.stderr, flush=True)
    serve_http(app, listener, http.settings, log_level="warning")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.data_dir_given = any(arg.split("=")[0] == "--data-dir" for arg in argv)
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr, format="%(name)s: %(message)s"
    )

    if args.assess:  # the operator reads each episode's outcome
        logging.getLogger("sqlenv_mcp.assessment").setLevel(logging.INFO)

    def start() -> None:
        serve(build_server(args), args)

    return run_main("sqlenv-mcp", start)
