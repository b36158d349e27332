"""A client of the 2026-07-28 protocol (no session) behind HAProxy, over two MCP replicas on
mcp 2.x: the balancer spreads its starts over the replicas and sends each later call to the
replica its handle names, so every episode plays wherever its calls would have gone; killing a
replica loses its episodes alone, each refused by name."""

import shutil

import httpx
import pytest
from mcp import Client

from deploy.serve_replicas import Ports, Replicas
from env_core.settings import Settings

pytestmark = pytest.mark.anyio
SEEDS = range(6)


async def test_a_sessionless_client_plays_across_replicas_and_loses_only_a_dead_ones():
    if shutil.which("haproxy") is None:
        pytest.fail("haproxy is missing: scripts/apt-install.sh haproxy haproxy (make test does)")
    with Replicas(2, Settings(), Ports.free(), kinds=("mcp",)) as replicas:
        async with Client(f"{replicas.mcp_url}/mcp", mode="2026-07-28") as client:
            handles = []
            for seed in SEEDS:
                started = await client.call_tool("start_episode", {"seed": seed})
                handles.append(started.structured_content["episode_id"])
            servers = {handle.partition(".")[0] for handle in handles}
            assert len(servers) == 2, handles  # the starts went round both replicas

            for handle in handles + handles:  # each call to its episode's replica
                played = await client.call_tool("query", {"sql": "SELECT 1", "episode_id": handle})
                assert not played.is_error, played.content
                assert played.structured_content["episode_id"] == handle
            held = {replica.name: replica.episodes() for replica in replicas.of_kind("mcp")}
            assert sum(counters["active"] for counters in held.values()) == len(SEEDS)
            assert sum(counters["steps"] for counters in held.values()) == 2 * len(SEEDS)

            dead = replicas.of_kind("mcp")[0]
            dead_id = httpx.get(f"{dead.server.url}/health").headers["sqlenv-server"]
            dead.server.process.kill()
            dead.server.process.wait()
            for handle in handles:
                after = await client.call_tool("query", {"sql": "SELECT 2", "episode_id": handle})
                told = after.content[0].text
                if handle.startswith(dead_id):
                    assert after.is_error and told.startswith(f"Error: no open episode '{handle}'")
                    assert "if that server has stopped, the episode is lost" in told
                else:
                    assert not after.is_error and "[12 steps left]" in told
