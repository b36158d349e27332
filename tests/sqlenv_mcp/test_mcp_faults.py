"""Faults around the MCP HTTP server: a client killed mid-episode, and a server restart."""

import signal
import subprocess
import sys
import textwrap
import time

import httpx
import pytest
from sdk_client import ProtocolError
from test_mcp_transports import http_client

pytestmark = pytest.mark.anyio

ABANDONING_CLIENT = textwrap.dedent(
    """
    import sys, anyio
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with streamable_http_client(sys.argv[1]) as (read, write, *_), ClientSession(
            read, write
        ) as client:
            await client.initialize()
            await client.call_tool("start_episode", {"seed": 3})
            await client.call_tool("query", {"sql": "SELECT 1"})
            print("playing", flush=True)
            await anyio.sleep(3600)

    anyio.run(main)
    """
)


def wait_for(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def test_a_killed_client_has_its_episode_reclaimed_within_the_ttl(http_server):
    server = http_server("--idle-ttl", "2")
    client = subprocess.Popen(
        [sys.executable, "-c", ABANDONING_CLIENT, f"{server.url}/mcp"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert client.stdout.readline().strip() == "playing"
    assert server.health()["episodes"]["active"] == 1
    client.send_signal(signal.SIGKILL)
    client.wait()
    assert wait_for(lambda: server.health()["episodes"]["active"] == 0, timeout_s=2 + 5)
    # Reaped with the episode, or closed with the connection the SDK ends after as long idle.
    episodes = server.health()["episodes"]
    assert (episodes["reaped"] + episodes["closed"], episodes["steps"]) == (1, 1)


async def test_after_a_restart_clients_get_a_clear_error_and_can_start_again(http_server):
    server = http_server()
    async with http_client(server.url) as client:
        await client.call_tool("start_episode", {"seed": 5})
        server.stop()
        restarted = http_server(port=server.port)
        # The client says so in its words: mcp 1.x "Session terminated", 2.x "Session not found".
        with pytest.raises(ProtocolError, match=r"Session (terminated|not found)"):
            await client.call_tool("query", {"sql": "SELECT 1"})
    async with http_client(restarted.url) as fresh:
        started = await fresh.call_tool("start_episode", {"seed": 5})
        assert not started.isError
        assert restarted.health()["episodes"]["active"] == 1
    assert httpx.get(f"{restarted.url}/health").json()["episodes"]["active"] == 0
