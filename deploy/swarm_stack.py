"""deploy/swarm/stack.yml deployed on this machine's Docker, for tests and benchmarks.

    with SwarmStack(settings) as stack:       # a swarm (initialised here if none is active)
        stack.scale(3)                        # OpenEnv and MCP replicas; HAProxy finds them
        ...                                   # clients use stack.openenv_url / stack.mcp_url

The images (sqlenv:test and sqlenv-balancer:test unless named) must be built. Leaving the
block removes the stack and every network it made, and leaves the swarm if it initialised it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

STACK_FILE = Path(__file__).with_name("swarm") / "stack.yml"
BALANCER_DOCKERFILE = Path(__file__).with_name("swarm") / "balancer.Dockerfile"
KINDS = ("openenv", "mcp")
GATEWAY_BRIDGE = "docker_gwbridge"
_TOTALS = {"FRONTEND", "BACKEND"}


def docker(*args: str, timeout_s: float = 120, environment: dict[str, str] | None = None) -> str:
    environ = {**os.environ, **environment} if environment else None
    done = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout_s, env=environ
    )
    if done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args[:2])} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip()


def build_balancer(tag: str) -> None:
    deploy = BALANCER_DOCKERFILE.parents[1]
    docker(
        "build", "--network", "host", "--file", str(BALANCER_DOCKERFILE), "--tag", tag,
        str(deploy), timeout_s=900,
    )  # fmt: skip


def free_port() -> int:
    # Swarm publishes a host-mode port on every address of the node: look for one free there.
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", 0))
        return probe.getsockname()[1]


@dataclass
class SwarmStack:
    """The stack, deployed as `name`, serving `spider_dir` (read-only) with `split`.
    `environment` adds variables the stack file reads (e.g. per-client limits)."""

    spider_dir: str
    split: str
    image: str = "sqlenv:test"
    balancer_image: str = "sqlenv-balancer:test"
    environment: dict[str, str] = field(default_factory=dict)
    name: str = field(default_factory=lambda: f"sqlenv-{uuid.uuid4().hex[:6]}")
    swarm_initialised_here: bool = False

    def __post_init__(self) -> None:
        self.ports = {kind: free_port() for kind in ("openenv", "mcp", "stats")}

    @property
    def openenv_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['openenv']}"

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['mcp']}"

    @property
    def stats_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['stats']}"

    def __enter__(self) -> SwarmStack:
        try:
            self._join_swarm()
            self._deploy()
            self.wait_until_serving(1)
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.remove()

    def service(self, kind: str) -> str:
        return f"{self.name}_{kind}"

    def scale(self, replicas: int) -> None:
        """`docker service scale` both kinds; returns once the balancer has them all UP."""
        docker("service", "scale", "--detach", *(f"{self.service(k)}={replicas}" for k in KINDS))
        self.wait_until_serving(replicas)

    def server_states(self, kind: str) -> dict[str, str]:
        """HAProxy's view of each replica slot of `kind`: UP, DOWN, MAINT (resolution) ..."""
        csv = httpx.get(f"{self.stats_url}/;csv", timeout=5).text.lstrip("# ").splitlines()
        header = csv[0].split(",")
        rows = [dict(zip(header, line.split(","), strict=False)) for line in csv[1:]]
        return {
            row["svname"]: row["status"]
            for row in rows
            if row["pxname"] == f"{kind}_replicas" and row["svname"] not in _TOTALS
        }

    def up(self, kind: str) -> set[str]:
        return {name for name, state in self.server_states(kind).items() if state == "UP"}

    def containers(self, kind: str) -> list[str]:
        """The ids of the running containers of `kind`'s replicas."""
        label = f"com.docker.swarm.service.name={self.service(kind)}"
        return docker("ps", "--quiet", "--filter", f"label={label}").split()

    def wait_until_serving(self, replicas: int, timeout_s: float = 180) -> None:
        """Until the balancer has `replicas` of each kind UP and answers on both ports."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if all(len(self.up(kind)) == replicas for kind in KINDS):
                    return
            except (httpx.HTTPError, IndexError, KeyError):
                pass  # the balancer is starting
            time.sleep(0.5)
        tasks = docker("stack", "ps", "--no-trunc", self.name)
        raise RuntimeError(f"stack {self.name} did not serve {replicas} replicas:\n{tasks}")

    def remove(self) -> None:
        """Remove the stack, wait until its containers and networks are gone, and leave the
        swarm if it was initialised here (idempotent)."""
        subprocess.run(["docker", "stack", "rm", self.name], capture_output=True, timeout=60)
        label = f"label=com.docker.stack.namespace={self.name}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            left = docker("ps", "--all", "--quiet", "--filter", label)
            left += docker("network", "ls", "--quiet", "--filter", label)
            if not left:
                break
            time.sleep(0.5)
        if self.swarm_initialised_here:
            docker("swarm", "leave", "--force")
            # The swarm's bridge to the node's network, made with its first container: leaving
            # keeps it.
            if docker("network", "ls", "--quiet", "--filter", f"name=^{GATEWAY_BRIDGE}$"):
                docker("network", "rm", GATEWAY_BRIDGE)
            self.swarm_initialised_here = False

    def _join_swarm(self) -> None:
        if docker("info", "--format", "{{.Swarm.LocalNodeState}}") != "active":
            docker("swarm", "init", "--advertise-addr", "127.0.0.1")
            self.swarm_initialised_here = True

    def _deploy(self) -> None:
        variables = {
            "SQLENV_IMAGE": self.image,
            "SQLENV_BALANCER_IMAGE": self.balancer_image,
            "SQLENV_SPIDER_DIR": str(Path(self.spider_dir).resolve()),
            "SQLENV_SPLIT": self.split,
            "SQLENV_OPENENV_PORT": str(self.ports["openenv"]),
            "SQLENV_MCP_PORT": str(self.ports["mcp"]),
            "SQLENV_STATS_PORT": str(self.ports["stats"]),
            **self.environment,
        }
        docker(
            "stack", "deploy", "--compose-file", str(STACK_FILE), self.name, environment=variables
        )

    def episodes(self, container: str, kind: str) -> dict[str, int]:
        """A replica's episode counters, read inside its container (replicas publish no port)."""
        path = "/stats" if kind == "openenv" else "/health"
        read = f"import urllib.request as r; print(r.urlopen('http://127.0.0.1:8000{path}').read().decode())"
        counters = json.loads(docker("exec", container, "python", "-c", read))
        return counters.get("episodes", counters)
