"""Starting `sqlenv-mcp` processes for tests: over stdio for an SDK client, or over HTTP."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from mcp import StdioServerParameters


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "sqlenv_mcp", *args]


def stdio_params(*args: str) -> StdioServerParameters:
    """A stdio server process; the child gets PATH only, as hosts start servers."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "sqlenv_mcp", *args],
        env={"PATH": os.environ["PATH"]},
    )


class RunningServer:
    """A `sqlenv-mcp --transport http` process on 127.0.0.1, stopped when the test ends."""

    def __init__(self, args: list[str], cache_dir: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = server_command(
            "--transport", "http", "--port", str(self.port), "--cache-dir", str(cache_dir), *args
        )
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.process.stderr.read()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("server did not answer /healthz within 60 s")

    def health(self) -> dict:
        return httpx.get(f"{self.url}/healthz", timeout=5).json()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
