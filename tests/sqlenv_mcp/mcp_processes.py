"""Starting `sqlenv-mcp` processes for tests: over stdio for an SDK client, or over HTTP."""

import os
import sys
from pathlib import Path

import httpx
from mcp import StdioServerParameters

from evals.local_server import LocalServer, free_port


def stdio_params(*args: str) -> StdioServerParameters:
    """A stdio server process; the child gets PATH only, as hosts start servers."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "sqlenv_mcp", *args],
        env={"PATH": os.environ["PATH"]},
    )


class RunningServer(LocalServer):
    """A `sqlenv-mcp --transport http` process on 127.0.0.1, stopped when the test ends."""

    def __init__(self, args: list[str], cache_dir: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        command = [sys.executable, "-m", "sqlenv_mcp", "--transport", "http"]
        command += ["--port", str(self.port), "--cache-dir", str(cache_dir), *args]
        super().__init__(command, self.port, "/healthz")

    def health(self) -> dict:
        return httpx.get(f"{self.url}/healthz", timeout=5).json()
