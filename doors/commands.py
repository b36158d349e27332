"""The doors' console scripts. Each reads its arguments before it imports its door, so
`--help`, `--version` and a mistake answer at once, with or without the door's extra."""

from __future__ import annotations

import argparse
import sys

from env_core.command_line import CommandParser, run_main
from env_core.settings import Settings, add_arguments
from serving.asgi import listening_socket


def openenv_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="sqlenv-openenv",
        description="Serve the sqlenv SQL-exploration environment with OpenEnv (WebSocket /ws, "
        "HTTP /reset /step /state, JSON-RPC /mcp; /web with --web).",
    )
    parser.add_argument(
        "--web",
        action="store_true",
        help="serve the /web page too (also with ENABLE_WEB_INTERFACE=true, OpenEnv's switch)",
    )
    add_arguments(parser)
    return parser


def openenv(argv: list[str] | None = None) -> int:
    """`sqlenv-openenv`: the OpenEnv server."""
    arguments = openenv_parser().parse_args(argv)

    def serve() -> None:
        settings = Settings.from_arguments(arguments)
        # Bound first: a port in use is said before the door's libraries load.
        listener = listening_socket(settings.host, settings.port)
        from doors.openenv.server import serve

        serve(settings, listener, web=arguments.web)

    return run_main("sqlenv-openenv", serve)


if __name__ == "__main__":
    sys.exit(openenv())
