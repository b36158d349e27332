"""A server process on a free 127.0.0.1 port, stopped with the door that started it."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time

import httpx

from env_core.parent_watch import PARENT_VARIABLE

REACH_TIMEOUT_S = 10.0


def check_reachable(url: str, what: str, path: str = "") -> None:
    """Raise `ConnectionError`, in one sentence, unless something answers HTTP at url + path."""
    try:
        httpx.get(url.rstrip("/") + path, timeout=REACH_TIMEOUT_S)
    except httpx.TimeoutException:
        reason = f"no answer within {REACH_TIMEOUT_S:g} s"
    except httpx.HTTPError as error:
        reason = "connection refused" if isinstance(error, httpx.ConnectError) else str(error)
    else:
        return
    raise ConnectionError(f"cannot reach the {what} at {url}: {reason}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalServer:
    """Runs `command` (which must serve GET {health_path} on `port`) until `stop`."""

    def __init__(
        self, command: list[str], port: int, health_path: str, startup_s: float = 120.0
    ) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115  (closed in stop)
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            env={**os.environ, PARENT_VARIABLE: str(os.getpid())},  # it stops when we do
        )
        deadline = time.monotonic() + startup_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{command[0]} exited at start-up: {self.output()[-2000:]}")
            try:
                if httpx.get(self.url + health_path, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not answer {health_path} within {startup_s:g} s")

    def output(self) -> str:
        """What the server has written to stderr so far."""
        self._log.seek(0)
        return self._log.read()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()
