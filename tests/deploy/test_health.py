"""Health checks say whether a server can serve: a server whose SQL workers cannot start is
unhealthy (503, and why) while that lasts, so that a load balancer takes it out of service, and
healthy again once one can, with no call needed to bring it back. Both servers answer at the
same path in the same words, OpenEnv's ("healthy", "unhealthy")."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import httpx
import psutil
import pytest
from served_episodes import episode

from env_core.errors import ServerBusyError
from env_core.sandbox import NO_WORKER_STARTS
from serving.local_server import LocalServer

TOKEN = "s3cret"
# door: module and options
DOORS = {
    "mcp": ["sqlenv_mcp", "--transport", "http", "--auth-token", TOKEN],
    "openenv": ["doors.commands"],
}
# A function, so only a worker runs it the first time (see env_core.programs).
SQL = "SELECT abs(count(*)) FROM books"


@contextmanager
def every_worker_killed(server: LocalServer) -> Iterator[None]:
    """Kill each process the server starts as soon as it appears (as the kernel's
    out-of-memory killer might): no SQL worker can start while this lasts."""
    stop = threading.Event()

    def kill_children() -> None:
        while not stop.wait(0.005):
            for child in psutil.Process(server.process.pid).children(recursive=True):
                with suppress(psutil.NoSuchProcess):
                    child.kill()

    killer = threading.Thread(target=kill_children)
    killer.start()
    try:
        yield
    finally:
        stop.set()
        killer.join()


def health_becomes(url: str, status: int, headers: dict | None = None) -> httpx.Response:
    deadline = time.monotonic() + 20
    while True:
        response = httpx.get(url, headers=headers, timeout=5)
        if response.status_code == status:
            return response
        assert time.monotonic() < deadline, f"still {response.status_code}: {response.text}"
        time.sleep(0.1)


async def one_query(door: str, url: str) -> str:
    async with episode(door, url, "city_library", TOKEN if door == "mcp" else None) as call:
        return await call("query", {"sql": SQL})


@pytest.mark.parametrize("door", DOORS)
def test_a_server_whose_sql_workers_cannot_start_is_unhealthy_until_one_can(door):
    path = "/health"
    server = LocalServer([sys.executable, "-m", *DOORS[door], "--sql-workers", "1"], path)
    token = {"Authorization": f"Bearer {TOKEN}"} if door == "mcp" else None
    try:
        assert httpx.get(server.url + path, headers=token).json()["status"] == "healthy"
        with every_worker_killed(server):
            refused = health_becomes(server.url + path, 503, token).json()
            assert (refused["status"], refused["detail"]) == ("unhealthy", NO_WORKER_STARTS)
            text = asyncio.run(one_query(door, server.url))
            assert text.startswith(f"Error: {ServerBusyError.without_workers()}")
            if door == "mcp":  # a check without the token is told the status alone
                bare = httpx.get(server.url + path)
                assert (bare.status_code, bare.json()) == (503, {"status": "unhealthy"})
        health_becomes(server.url + path, 200, token)
        assert asyncio.run(one_query(door, server.url)).startswith("abs(count(*))\n32\n")
        assert "cannot start a SQL worker process" in server.output()
    finally:
        server.stop()
