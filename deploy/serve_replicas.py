"""Several sqlenv server processes behind HAProxy: one URL per protocol.

    python deploy/serve_replicas.py --replicas 4 --data-dir ../shared/data/spider
    make serve-replicas N=4

Starts N OpenEnv servers and N MCP streamable-HTTP servers on free 127.0.0.1 ports, then
HAProxy (`haproxy` on PATH; scripts/apt-install.sh haproxy haproxy) with deploy/haproxy.cfg
in front of them: OpenEnv (WebSocket /ws, HTTP, /web) on --openenv-port, MCP at /mcp on
--mcp-port, HAProxy's statistics on --stats-port. When everything answers it prints one JSON
line on stdout (the URLs, and each replica's URL and process id), then serves until
interrupted and stops every process it started.
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from env_core.command_line import run_main
from env_core.settings import Settings, add_arguments
from serving.asgi import bound_socket
from serving.local_server import LocalServer

TEMPLATE = Path(__file__).with_name("haproxy.cfg")


@dataclass
class Replica:
    name: str
    server: LocalServer
    counters_path: str

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.server.url, "pid": self.server.process.pid}

    def episodes(self) -> dict[str, int]:
        """The replica's episode counters (active, created, closed, reaped, steps)."""
        counters = httpx.get(f"{self.server.url}{self.counters_path}", timeout=5).json()
        return counters.get("episodes", counters)


@dataclass(frozen=True)
class Ports:
    """The balancer's ports: OpenEnv, MCP and HAProxy's statistics; 0 is any free port."""

    openenv: int
    mcp: int
    stats: int

    @classmethod
    def free(cls) -> Ports:
        return cls(0, 0, 0)


class Replicas:
    """`count` OpenEnv and `count` MCP servers with `settings` (data, episodes, SQL limits),
    behind one HAProxy. A context manager: everything answers inside the `with` block and is
    stopped after it. `server_args` are extra flags for every server (e.g. per-client limits),
    `mcp_args` for the MCP servers only (e.g. --stateless). `kinds`: the protocols served.
    """

    def __init__(
        self,
        count: int,
        settings: Settings,
        ports: Ports,
        server_args: list[str] | tuple[str, ...] = (),
        mcp_args: list[str] | tuple[str, ...] = (),
        kinds: tuple[str, ...] = ("openenv", "mcp"),
    ) -> None:
        self.count, self.settings, self.ports = count, settings, ports
        self.server_args = list(server_args)
        self.mcp_args = list(mcp_args)
        self.kinds = kinds
        self.replicas: list[Replica] = []
        self.balancer: subprocess.Popen | None = None
        self._listeners: list[socket.socket] = []
        self._workdir = tempfile.TemporaryDirectory(prefix="sqlenv-replicas-")

    @property
    def openenv_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.openenv}"

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.mcp}"

    @property
    def stats_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.stats}"

    def __enter__(self) -> Replicas:
        try:
            self._listen()
            self._start_replicas()
            self._start_balancer()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def of_kind(self, kind: str) -> list[Replica]:
        return [replica for replica in self.replicas if replica.name.startswith(f"{kind}-")]

    def config(self) -> str:
        """deploy/haproxy.cfg with this set's addresses and server lines."""
        openenv, mcp, stats = (f"fd@{listener.fileno()}" for listener in self._listeners)
        fields = {
            "@OPENENV_BIND@": openenv,
            "@MCP_BIND@": mcp,
            "@STATS_BIND@": stats,
            "@OPENENV_SERVERS@": self._server_lines("openenv"),
            "@MCP_SERVERS@": self._server_lines("mcp"),
        }
        text = TEMPLATE.read_text()
        for field, value in fields.items():
            text = text.replace(field, value)
        return text

    def server_states(self) -> dict[str, str]:
        """HAProxy's view of each replica: UP, DOWN, ... (from its statistics CSV)."""
        csv = httpx.get(f"{self.stats_url}/;csv", timeout=5).text.lstrip("# ").splitlines()
        header = csv[0].split(",")
        rows = [dict(zip(header, line.split(","), strict=False)) for line in csv[1:]]
        return {row["svname"]: row["status"] for row in rows if row["svname"] not in _TOTALS}

    def stop(self) -> None:
        if self.balancer is not None:
            self.balancer.terminate()
            self.balancer.wait(timeout=10)
            self.balancer = None
        for replica in self.replicas:
            replica.server.stop()
        self.replicas = []
        self._close_listeners()
        self._workdir.cleanup()

    def _listen(self) -> None:
        """Bind the balancer's sockets before anything starts, for HAProxy to take over: a
        port in use is named at once, and a free one is held from then on (a port only looked
        up free could become a connection's own port while the replicas start)."""
        for port in (self.ports.openenv, self.ports.mcp, self.ports.stats):
            listener = bound_socket("127.0.0.1", port)
            self._listeners.append(listener)
            listener.listen(socket.SOMAXCONN)
        self.ports = Ports(*(listener.getsockname()[1] for listener in self._listeners))

    def _close_listeners(self) -> None:
        for listener in self._listeners:
            listener.close()
        self._listeners = []

    def _start_replicas(self) -> None:
        # HAProxy connects from 127.0.0.1 and names each client in X-Forwarded-For.
        flags = [*self.settings.arguments(), "--trusted-proxies", "127.0.0.1", *self.server_args]
        python = sys.executable
        # name: (command, health path, episode counters path)
        kinds = {
            "openenv": ([python, "-m", "doors.commands", *flags], "/health", "/stats"),
            "mcp": (
                [python, "-m", "sqlenv_mcp", "--transport", "http", *flags, *self.mcp_args],
                "/health",
                "/health",
            ),
        }
        commands = {
            f"{kind}-{index}": kinds[kind]
            for index in range(1, self.count + 1)
            for kind in self.kinds
        }

        def start(name: str) -> Replica:
            command, health_path, counters_path = commands[name]
            server = LocalServer(command, health_path)
            return Replica(name, server, counters_path)

        # Started side by side: each spends seconds importing and loading its catalog.
        with ThreadPoolExecutor(len(commands)) as pool:
            futures = [pool.submit(start, name) for name in commands]
            for future in futures:
                if future.exception() is None:
                    self.replicas.append(future.result())
            for future in futures:
                future.result()

    def _server_lines(self, kind: str) -> str:
        return "\n".join(
            f"    server {replica.name} {replica.server.url.removeprefix('http://')}"
            for replica in self.of_kind(kind)
        )

    def _start_balancer(self) -> None:
        config = Path(self._workdir.name) / "haproxy.cfg"
        config.write_text(self.config())
        log = Path(self._workdir.name) / "haproxy.log"
        with log.open("w") as stderr:
            self.balancer = subprocess.Popen(
                ["haproxy", "-db", "-f", str(config)],
                stdout=stderr,
                stderr=stderr,
                pass_fds=[listener.fileno() for listener in self._listeners],
            )
        # HAProxy holds the sockets now: with it gone, clients are refused, not left waiting.
        self._close_listeners()
        deadline = time.monotonic() + 30
        urls = {"openenv": self.openenv_url, "mcp": self.mcp_url}
        for url in (f"{urls[kind]}/health" for kind in self.kinds):
            while not _answers(url):
                if self.balancer.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"HAProxy did not start: {log.read_text()[-2000:]}")
                time.sleep(0.1)


_TOTALS = {"FRONTEND", "BACKEND"}


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=4, help="servers of each kind (4)")
    parser.add_argument("--openenv-port", type=int, default=8000, help="(8000)")
    parser.add_argument("--mcp-port", type=int, default=8001, help="(8001)")
    parser.add_argument("--stats-port", type=int, default=8404, help="(8404)")
    parser.add_argument(
        "--server-args",
        default="",
        help="more flags for every server, e.g. '--max-sessions-per-client 256'",
    )
    parser.add_argument(
        "--mcp-args",
        default="",
        help="more flags for the MCP servers, e.g. '--stateless'",
    )
    add_arguments(parser, groups=("data", "episodes", "sql"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    ports = Ports(args.openenv_port, args.mcp_port, args.stats_port)
    # SIGTERM stops everything the way Ctrl-C does.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    replicas = Replicas(
        args.replicas,
        Settings.from_arguments(args),
        ports,
        shlex.split(args.server_args),
        shlex.split(args.mcp_args),
    )
    try:
        with replicas:
            ready = {
                "openenv": replicas.openenv_url,
                "mcp": f"{replicas.mcp_url}/mcp",
                "stats": replicas.stats_url,
                "replicas": [replica.describe() for replica in replicas.replicas],
            }
            print(json.dumps(ready), flush=True)
            replicas.balancer.wait()
            print("HAProxy exited", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(run_main("serve_replicas", main))
