"""Nothing one client does is visible to another through results or their timing: a result kept
for one client (`KeptResults`) is given again to that client only, so another client asking the
same runs it anew, as slowly as a new statement runs, and is shown its own `elapsed_ms`.
In the engine, and through the MCP server with clients at two addresses."""

from __future__ import annotations

import json
import sys
import time

import httpx
import pytest
from served_episodes import MCP_HEADERS, MCP_INITIALIZE, mcp_reply

from env_core.manager import EpisodeManager
from env_core.settings import Settings
from serving.local_server import LocalServer

DEV = "dev_without_wta_1"
# ~30 ms in a SQL worker, too slow to be proven cheap: only a kept result answers it sooner.
SLOW = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000) "
    "SELECT count(*) FROM c"
)
# Far less than the statement takes to run anywhere.
RUN_MS = 5


def assert_ran_anew(first_ms: float, other: dict, took_ms: float) -> None:
    """The other client's call ran the statement itself: it shows a run of its own, which its
    call lasted at least as long as (a kept result came in 0.02 ms showing a 72 ms run)."""
    assert other["elapsed_ms"] != first_ms, "another client's elapsed_ms was shown"
    assert other["elapsed_ms"] > RUN_MS, other
    assert took_ms >= other["elapsed_ms"], (
        f"answered in {took_ms:.2f} ms showing a run of {other['elapsed_ms']} ms: a result "
        "kept for another client"
    )


def test_a_result_kept_for_one_client_is_not_given_to_another(spider_catalog):
    manager = EpisodeManager(spider_catalog, Settings(split=DEV))
    try:
        mine = manager.create(question_id=f"{DEV}:1", client="203.0.113.1")
        theirs = manager.create(question_id=f"{DEV}:1", client="203.0.113.2")
        first = mine.call("query", {"sql": SLOW})
        assert first.ok and first.data["elapsed_ms"] > RUN_MS, first.data
        assert mine.call("query", {"sql": SLOW}).data == first.data  # kept for its client
        started = time.monotonic()
        other = theirs.call("query", {"sql": SLOW})
        took_ms = (time.monotonic() - started) * 1000
        assert other.ok and other.data["rows"] == first.data["rows"]
        assert_ran_anew(first.data["elapsed_ms"], other.data, took_ms)
    finally:
        manager.shutdown()


class Connection:
    """An MCP connection over HTTP from one local address."""

    def __init__(self, url: str, address: str) -> None:
        transport = httpx.HTTPTransport(local_address=address)
        self.http = httpx.Client(transport=transport, headers=MCP_HEADERS, timeout=30)
        self.url = f"{url}/mcp"
        opened = self.http.post(self.url, json=MCP_INITIALIZE)
        opened.raise_for_status()
        self.http.headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        self.http.headers["mcp-protocol-version"] = "2025-06-18"
        notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        self.http.post(self.url, json=notice)

    def call(self, tool: str, arguments: dict) -> tuple[dict, float]:
        """The tool's structured result and the milliseconds it took to come."""
        request = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        request["params"] = {"name": tool, "arguments": arguments}
        started = time.monotonic()
        response = self.http.post(self.url, content=json.dumps(request))
        took_ms = (time.monotonic() - started) * 1000
        result = mcp_reply(response.text)["result"]
        assert not result.get("isError"), result
        return result["structuredContent"], took_ms

    def close(self) -> None:
        self.http.delete(self.url)
        self.http.close()


@pytest.fixture
def mcp_server(cache_dir):
    server = LocalServer([sys.executable, "-m", "sqlenv_mcp", "--transport", "http"], "/health")
    yield server
    server.stop()


def test_through_the_mcp_server_another_client_sees_nothing_of_a_kept_result(mcp_server):
    mine = Connection(mcp_server.url, "127.0.0.1")
    theirs = Connection(mcp_server.url, "127.0.0.2")
    try:
        for connection in (mine, theirs):
            connection.call("start_episode", {"seed": 0})
        first, _ = mine.call("query", {"sql": SLOW})
        first_ms = first["data"]["elapsed_ms"]
        assert first_ms > RUN_MS, first
        other, took_ms = theirs.call("query", {"sql": SLOW})
        assert other["data"]["rows"] == first["data"]["rows"]
        assert_ran_anew(first_ms, other["data"], took_ms)
    finally:
        mine.close()
        theirs.close()
