"""Assessment mode (`sqlenv-mcp --assess`): the operator assigns each episode; the agent sees
its question, cannot choose or restart it, and answers once. Over HTTP each assigned episode
has its own address and no other address opens a connection."""

import re

import httpx
import pytest
from mcp_processes import stdio_session
from sdk_client import Session, http_session

from env_core.answers import gold_as_json
from sqlenv_mcp.assessment import NO_SEAT

pytestmark = pytest.mark.anyio
DEV = "dev_without_wta_1"
ASSIGNED = f"{DEV}:0"  # How many singers do we have? (concert_singer)
NOT_CHOSEN = "your episode is assigned and cannot be chosen or restarted"


async def play_and_try_to_replay(client: Session, catalog, question_id: str) -> None:
    """Play the assigned episode right, trying every way to pick or restart a question."""
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert sorted(listed) == ["answer", "describe", "query", "sample", "start_episode"]
    assert listed["start_episode"].inputSchema.get("properties", {}) == {}
    assert all("episode_id" not in tool.inputSchema["properties"] for tool in listed.values())

    question = catalog.question(question_id)
    first = await client.call_tool("start_episode", {})
    assert not first.isError and first.structuredContent["question"] == question.text
    again = await client.call_tool("start_episode", {})
    assert again.structuredContent["episode_id"] == first.structuredContent["episode_id"]
    for selectors in ({"question_id": f"{DEV}:5"}, {"seed": 3}, {"db_id": "world_1"}):
        picked = await client.call_tool("start_episode", selectors)
        assert picked.isError and NOT_CHOSEN in picked.content[0].text
    other = await client.call_tool("describe", {"table": "singer", "episode_id": "x"})
    assert other.isError and "describe does not take 'episode_id'" in other.content[0].text

    answered = await client.call_tool("answer", {"value": gold_as_json(question.gold)})
    assert answered.structuredContent["data"] == {"correct": True}
    assert answered.structuredContent["done"] is True
    twice = await client.call_tool("answer", {"value": "6"})
    ended = twice.content[0].text
    assert twice.isError and "assigned episode has ended (was answered)" in ended
    assert "start a new episode" not in ended
    replay = await client.call_tool("start_episode", {})
    assert replay.structuredContent["episode_id"] == first.structuredContent["episode_id"]
    after = await client.call_tool("query", {"sql": "SELECT 1"})
    assert after.isError and after.structuredContent["done"] is True


async def test_over_stdio_the_one_assigned_question_is_played_once(
    spider_dir, spider_catalog, cache_dir, tmp_path
):
    data = ["--data-dir", str(spider_dir), "--split", DEV, "--cache-dir", str(cache_dir)]
    async with stdio_session(tmp_path / "stderr.log", *data, "--assess", ASSIGNED) as (
        client,
        initialized,
    ):
        assert "This is an assessment" in initialized.instructions
        await play_and_try_to_replay(client, spider_catalog, ASSIGNED)
    logged = (tmp_path / "stderr.log").read_text()
    assert f"{ASSIGNED}: correct, reward +0.980 after 2 steps" in logged


async def test_over_http_each_question_has_its_own_address(http_server, spider_catalog):
    assigned = [ASSIGNED, f"{DEV}:40"]
    server = http_server("--assess", ",".join(assigned))
    addresses = dict(re.findall(r"assessing (\S+) at (http://\S+/mcp)", server.output()))
    assert sorted(addresses) == sorted(assigned)
    for question_id, address in addresses.items():
        assert address.startswith(f"{server.url}/assess/")
        async with http_session(address) as (client, _):
            if question_id == ASSIGNED:
                await play_and_try_to_replay(client, spider_catalog, question_id)
            else:
                started = await client.call_tool("start_episode", {})
                assert started.structuredContent["question"] == (
                    spider_catalog.question(question_id).text
                )
    token = addresses[ASSIGNED].split("/")[-2]
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    altered = token[:-1] + ("y" if token.endswith("x") else "x")  # one character off
    for wrong in (f"{server.url}/mcp", f"{server.url}/assess/{altered}/mcp"):
        refused = httpx.post(wrong, json=initialize, timeout=10)
        assert refused.status_code == 404
        # A JSON-RPC error, as the SDK answers an unknown session (its body was {"error": "..."}).
        assert refused.json() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": NO_SEAT},
        }
    assert f"{ASSIGNED}: correct" in server.output()


def test_a_health_check_is_told_the_seats_only_with_the_token(http_server):
    """/health told anyone how many seats the operator had handed out."""
    server = http_server("--assess", ASSIGNED)
    assert httpx.get(server.url + "/health", timeout=10).json() == {"status": "healthy"}
    guarded = http_server("--assess", ASSIGNED, "--auth-token", "operator-secret")
    assert httpx.get(guarded.url + "/health", timeout=10).json() == {"status": "healthy"}
    told = httpx.get(
        guarded.url + "/health", headers={"Authorization": "Bearer operator-secret"}, timeout=10
    )
    assert told.json() == {"status": "healthy", "seats": 1}
