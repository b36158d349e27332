"""A server process on a free 127.0.0.1 port, stopped with the door that started it."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time

import httpx

from serving.asgi import INHERITED_LISTENER_VARIABLE, bound_socket
from serving.parent_watch import PARENT_VARIABLE
from serving.server_reads import fetch


def check_reachable(url: str, what: str, path: str = "") -> None:
    """Raise `ServerError`, in one sentence, unless something answers HTTP at url + path
    within `server_reads`' bounds."""
    fetch(url, path, what)


class LocalServer:
    """Runs `command` with `--port` on a free 127.0.0.1 port until `stop`; the command must
    serve GET {health_path} there. This process binds the port and hands the socket over
    (`serving.asgi.listening_socket` takes it), so that nothing takes the port while the
    server starts: a port only looked up free can meanwhile become a connection's own."""

    def __init__(
        self, command: list[str], health_path: str, *, port: int = 0, startup_s: float = 120.0
    ) -> None:
        """`port`: a given one rather than a free one (to start a server again where it was)."""
        self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115  (closed in stop)
        with bound_socket("127.0.0.1", port) as listener:
            self.port = listener.getsockname()[1]
            self.url = f"http://127.0.0.1:{self.port}"
            handed_over = {
                INHERITED_LISTENER_VARIABLE: str(listener.fileno()),
                PARENT_VARIABLE: str(os.getpid()),  # it stops when we do
            }
            self.process = subprocess.Popen(
                [*command, "--port", str(self.port)],
                stdout=subprocess.DEVNULL,
                stderr=self._log,
                env={**os.environ, **handed_over},
                pass_fds=[listener.fileno()],
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
