"""Starting `sqlenv-mcp` processes for tests: over stdio for an SDK client, or over HTTP."""

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from sdk_client import Session, wired

from serving.local_server import LocalServer


def stdio_params(*args: str) -> StdioServerParameters:
    """A stdio server process; the child gets PATH only, as hosts start servers."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "sqlenv_mcp", *args],
        env={"PATH": os.environ["PATH"]},
    )


@asynccontextmanager
async def stdio_session(errlog: Path, *args: str) -> AsyncIterator[tuple[Session, Any]]:
    """An initialised SDK client of a stdio server process whose stderr goes to `errlog`."""
    with errlog.open("w") as log:
        async with (
            stdio_client(stdio_params(*args), errlog=log) as (read, write),
            ClientSession(read, write) as client,
        ):
            yield Session(client), wired(await client.initialize())


class RunningServer(LocalServer):
    """A `sqlenv-mcp --transport http` process on 127.0.0.1, stopped when the test ends."""

    def __init__(self, args: list[str], cache_dir: Path, port: int = 0) -> None:
        command = [sys.executable, "-m", "sqlenv_mcp", "--transport", "http"]
        command += ["--cache-dir", str(cache_dir), *args]
        super().__init__(command, "/health", port=port)

    def health(self) -> dict:
        return httpx.get(f"{self.url}/health", timeout=5).json()
