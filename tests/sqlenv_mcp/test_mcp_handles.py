"""Episodes by handle: the episode_id start_episode gives is the capability to act on the
episode, from any session or from none, and only on the server that issued it."""

import asyncio
import re

import httpx
import pytest
from sdk_client import connect, http_session

from sqlenv_mcp.handles import SHAPE
from sqlenv_mcp.server import build_episode_server

pytestmark = pytest.mark.anyio
DEV = "dev_without_wta_1"
HEADERS = {"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-06-18"}


def text(result) -> str:
    return result.content[0].text


def steps_left(result) -> int:
    return int(re.search(r"\[(\d+) steps left\]", text(result)).group(1))


async def test_any_session_with_the_handle_acts_on_the_episode_and_none_without(manager):
    server = build_episode_server(manager)
    async with connect(server) as starter, connect(server) as other:
        started = await starter.call_tool("start_episode", {"question_id": f"{DEV}:0"})
        handle = started.structuredContent["episode_id"]
        assert SHAPE.fullmatch(handle)
        mine = await other.call_tool("query", {"sql": "SELECT 1", "episode_id": handle})
        assert not mine.isError and mine.structuredContent["episode_id"] == handle
        without = await other.call_tool("query", {"sql": "SELECT 1"})
        assert without.isError and "no episode is running in this session" in text(without)
        current = await starter.call_tool("query", {"sql": "SELECT 1"})
        assert steps_left(current) == steps_left(mine) - 1  # one episode, one budget
        answered = await other.call_tool("answer", {"value": "6", "episode_id": handle})
        assert answered.structuredContent["data"] == {"correct": True}


async def test_handles_this_server_did_not_issue_are_refused_saying_why(manager):
    server, elsewhere = build_episode_server(manager), build_episode_server(manager)
    async with connect(server) as client, connect(elsewhere) as stranger:
        started = await client.call_tool("start_episode", {"question_id": f"{DEV}:0"})
        handle = started.structuredContent["episode_id"]
        theirs = (await stranger.call_tool("start_episode", {"seed": 1})).structuredContent
        server_id, nonce, check = handle.split(".")
        flipped = "0" if check[0] != "0" else "1"
        cases = {
            f"{server_id}.{nonce}.{flipped}{check[1:]}": "this server did not issue that "
            "episode id (it names this server but its check does not match: altered or forged)",
            handle[:-1]: "that is no episode id a server gives (cut short or altered?)",
            handle + "0" * 1_000_000: "that is no episode id a server gives",
            handle[:-1] + "\u0430": "that is no episode id a server gives",  # Cyrillic a
            "\ud800" + handle: "that is no episode id a server gives",
            theirs["episode_id"]: f"it was started on another server ({theirs['episode_id'][:8]}"
            f"; this is {server_id}), which alone holds it; if that server has stopped, the "
            "episode is lost",
        }
        for given, reason in cases.items():
            refused = await client.call_tool("describe", {"table": "singer", "episode_id": given})
            assert refused.isError and reason in text(refused), (given[:80], text(refused))
            assert text(refused).startswith("Error: no open episode '")
            assert len(text(refused)) < 400
            assert refused.structuredContent["data"]["error"] == "unknown_episode"
        # Nothing was spent, on this episode or on the other server's.
        after = await client.call_tool("query", {"sql": "SELECT 1", "episode_id": handle})
        assert steps_left(after) == 14
        other = await stranger.call_tool("query", {"sql": "SELECT 1"})
        assert steps_left(other) == 14


async def test_an_ended_episodes_handle_is_refused_naming_the_episode(manager):
    async with connect(build_episode_server(manager)) as client:
        first = (await client.call_tool("start_episode", {"seed": 1})).structuredContent
        await client.call_tool("start_episode", {"seed": 2})  # ends the first
        ended = await client.call_tool(
            "query", {"sql": "SELECT 1", "episode_id": first["episode_id"]}
        )
        assert text(ended).startswith(
            f"Error: no open episode '{first['episode_id']}': it has ended (ended, or replaced by "
            "a newer start in its session) or expired after 900 s idle; start a new episode"
        )
        answered = await client.call_tool("start_episode", {"question_id": f"{DEV}:0"})
        handle = answered.structuredContent["episode_id"]
        await client.call_tool("answer", {"value": "6"})
        again = await client.call_tool("answer", {"value": "6", "episode_id": handle})
        assert again.isError
        assert f"episode {handle} has ended (was answered); start a new episode" in text(again)
        assert manager.stats().active == 1


async def test_concurrent_calls_on_one_handle_share_its_budget(manager):
    server = build_episode_server(manager)
    async with connect(server) as starter:
        started = await starter.call_tool("start_episode", {"question_id": f"{DEV}:0"})
        handle = started.structuredContent["episode_id"]

        async def call_from_a_session_of_its_own(n: int):
            async with connect(server) as client:
                sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
                sql += f"WHERE x < 20000) SELECT count(*) + {n} FROM c"
                return await client.call_tool("query", {"sql": sql, "episode_id": handle})

        results = await asyncio.gather(*(call_from_a_session_of_its_own(n) for n in range(8)))
        made = [r for r in results if not r.isError]
        busy = [r for r in results if r.isError]
        assert made and all("is still running a call" in text(r) for r in busy)
        after = await starter.call_tool("query", {"sql": "SELECT 1"})
        assert steps_left(after) == 15 - len(made) - 1


def call(url: str, tool: str, arguments: dict, **client) -> dict:
    """One tools/call as a sessionless client makes it: a JSON-RPC POST, no session."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": tool, "arguments": arguments}
    with httpx.Client(timeout=30, **client) as http:
        reply = http.post(f"{url}/mcp", json=body, headers=HEADERS)
    assert reply.status_code == 200, reply.text
    return reply.json()["result"]


def test_a_stateless_server_plays_an_episode_by_handle_alone(http_server):
    server = http_server("--stateless")
    started = call(server.url, "start_episode", {"question_id": f"{DEV}:0"})
    handle = started["structuredContent"]["episode_id"]
    assert server.health()["episodes"]["active"] == 1  # it outlives the request
    no_handle = call(server.url, "query", {"sql": "SELECT 1"})
    assert no_handle["isError"]
    assert (
        "this request has no MCP session, so no current episode" in no_handle["content"][0]["text"]
    )
    counted = call(
        server.url, "query", {"sql": "SELECT count(*) FROM singer", "episode_id": handle}
    )
    assert counted["structuredContent"]["data"]["rows"] == [[6]]
    # The handle is the capability, whatever address presents it.
    elsewhere = {"transport": httpx.HTTPTransport(local_address="127.0.0.2")}
    answered = call(server.url, "answer", {"value": "6", "episode_id": handle}, **elsewhere)
    assert answered["structuredContent"]["data"] == {"correct": True}
    assert answered["structuredContent"]["reward"] >= 1
    ended = call(server.url, "end_episode", {"episode_id": handle})
    assert ended["structuredContent"] == {"episode_id": handle, "closed": True}
    assert server.health()["episodes"]["active"] == 0


def test_each_call_in_a_new_session_plays_by_handle(http_server):
    """As the MCP Inspector CLI does: every command is a new session."""
    server = http_server()

    def in_new_session(tool: str, arguments: dict) -> dict:
        initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize"}
        initialize["params"] = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "per-call", "version": "1"},
        }
        with httpx.Client(timeout=30) as http:
            opened = http.post(f"{server.url}/mcp", json=initialize, headers=HEADERS)
            headers = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
            body["params"] = {"name": tool, "arguments": arguments}
            return http.post(f"{server.url}/mcp", json=body, headers=headers).json()["result"]

    handle = in_new_session("start_episode", {"question_id": f"{DEV}:0"})["structuredContent"][
        "episode_id"
    ]
    counted = in_new_session("query", {"sql": "SELECT count(*) FROM singer", "episode_id": handle})
    assert not counted["isError"], counted
    answered = in_new_session("answer", {"value": "6", "episode_id": handle})
    assert answered["structuredContent"]["data"] == {"correct": True}


async def test_the_sdk_client_plays_a_stateless_server_by_handle(http_server):
    server = http_server("--stateless")
    async with http_session(f"{server.url}/mcp") as (client, _):
        started = await client.call_tool("start_episode", {"question_id": f"{DEV}:0"})
        handle = started.structuredContent["episode_id"]
        current = await client.call_tool("query", {"sql": "SELECT 1"})
        assert current.isError and "no MCP session, so no current episode" in text(current)
        answered = await client.call_tool("answer", {"value": "6", "episode_id": handle})
        assert answered.structuredContent["data"] == {"correct": True}
