"""Docker for tests: the daemon (installed and started by scripts/docker-stand-in-base.sh when
none answers, with the stand-in base image), and containers, each stopped by its id."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from deploy.swarm_stack import docker

REPOSITORY = Path(__file__).resolve().parents[2]
STAND_IN_BASE = REPOSITORY / "scripts" / "docker-stand-in-base.sh"


@contextmanager
def docker_daemon(pid_file: Path) -> Iterator[None]:
    """A Docker daemon that answers, with the stand-in base image; a daemon started here is
    stopped at the end. Fails the test when Docker cannot be installed or started."""
    prepared = subprocess.run(
        [str(STAND_IN_BASE), str(pid_file)], capture_output=True, text=True, timeout=900
    )
    try:
        if prepared.returncode != 0:
            pytest.fail(f"Docker could not be started:\n{prepared.stderr[-3000:]}", pytrace=False)
        yield
    finally:
        if pid_file.exists():
            stop_process(int(pid_file.read_text()))


def stop_process(pid: int, timeout_s: float = 30) -> None:
    """End a process that is not our child (so cannot be waited for) by its id."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _running(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = float("inf")
        time.sleep(0.2)


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


@dataclass
class Container:
    """A container started with `docker run -d`, its port 8000 published on 127.0.0.1."""

    id: str
    url: str

    @classmethod
    def run(cls, image: str, *options: str, command: tuple[str, ...] = ()) -> Container:
        container_id = docker(
            "run", "--detach", "--publish", "127.0.0.1::8000", *options, image, *command
        )
        try:
            address = docker("port", container_id, "8000/tcp").splitlines()[0]
        except BaseException:
            docker("rm", "--force", container_id)
            raise
        return cls(container_id, f"http://{address}")

    def wait_until_healthy(self, path: str, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + path, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if docker("inspect", "--format", "{{.State.Running}}", self.id) != "true":
                break
            time.sleep(0.3)
        raise RuntimeError(f"container did not answer {path}: {self.logs()}")

    def exec(self, *command: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["docker", "exec", self.id, *command], capture_output=True, text=True, timeout=timeout_s
        )

    def logs(self) -> str:
        done = subprocess.run(["docker", "logs", self.id], capture_output=True, text=True)
        return (done.stdout + done.stderr)[-3000:]

    def stop(self) -> None:
        """Remove the container (idempotent)."""
        subprocess.run(["docker", "rm", "--force", self.id], capture_output=True, timeout=60)
