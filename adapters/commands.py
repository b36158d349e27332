"""The adapters' console scripts: each checks its extra before importing the door it starts."""

from __future__ import annotations

import sys

from env_core.command_line import run_main


def openenv() -> int:
    """`sqlenv-openenv`: the OpenEnv server."""

    def serve() -> int:
        from adapters.openenv.server import main

        return main()

    return run_main("sqlenv-openenv", serve)


if __name__ == "__main__":
    sys.exit(openenv())
