"""The MCP server as its own process: over stdio and over streamable HTTP on 127.0.0.1."""

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx
import pytest
from mcp_processes import stdio_session
from sdk_client import Session, http_session
from served_episodes import MCP_HEADERS, MCP_INITIALIZE, mcp_reply

from env_core.answers import gold_as_json

pytestmark = pytest.mark.anyio
DEV = "dev_without_wta_1"


@asynccontextmanager
async def http_client(url: str) -> AsyncIterator[Session]:
    async with http_session(f"{url}/mcp") as (client, _initialized):
        yield client


async def play_full_episode(client: Session, catalog, question_id: str) -> list:
    question = catalog.question(question_id)
    start = await client.call_tool("start_episode", {"question_id": question_id})
    assert start.structuredContent["db_id"] == question.db_id
    results = [
        await client.call_tool("describe", {"table": start.structuredContent["tables"][0]}),
        await client.call_tool("query", {"sql": question.sql}),
        await client.call_tool("answer", {"value": gold_as_json(question.gold)}),
    ]
    assert [r.isError for r in results] == [False, False, False]
    assert results[-1].structuredContent["data"] == {"correct": True}
    return results


async def test_full_episode_over_stdio(spider_dir, spider_catalog, cache_dir, tmp_path):
    data = ["--data-dir", str(spider_dir), "--split", DEV, "--cache-dir", str(cache_dir)]
    async with stdio_session(tmp_path / "stderr.log", *data) as (client, init):
        assert "start_episode" in init.instructions
        await play_full_episode(client, spider_catalog, f"{DEV}:5")
    assert (tmp_path / "stderr.log").read_text() == ""


async def test_full_episode_over_http(http_server, spider_catalog):
    server = http_server()
    async with http_client(server.url) as client:
        await play_full_episode(client, spider_catalog, f"{DEV}:7")
        assert server.health()["episodes"]["active"] == 1
    assert server.health()["episodes"] == {
        "active": 0,
        "created": 1,
        "closed": 1,
        "reaped": 0,
        "steps": 3,
    }


async def test_closing_http_sessions_logs_no_error(http_server):
    """A client that ends its session (as the SDK client does when it exits) closes its
    event stream: the server logs that as nothing out of the ordinary."""
    server = http_server()
    for _ in range(3):
        async with http_client(server.url) as client:
            assert not (await client.call_tool("start_episode", {})).isError
    await anyio.sleep(0.5)
    assert "Traceback" not in server.output(), server.output()


async def test_four_concurrent_http_clients_are_isolated(http_server, spider_catalog):
    server = http_server()
    seen: dict[int, tuple[str, str]] = {}

    async def client_run(index: int) -> None:
        question_id = f"{DEV}:{index * 10}"
        async with http_client(server.url) as client:
            start = await client.call_tool("start_episode", {"question_id": question_id})
            episode_id = start.structuredContent["episode_id"]
            marker = f"client-{index}"
            for _ in range(5):
                echoed = await client.call_tool("query", {"sql": f"SELECT '{marker}'"})
                assert echoed.structuredContent["data"]["rows"] == [[marker]]
                assert echoed.structuredContent["episode_id"] == episode_id
            seen[index] = (episode_id, start.structuredContent["question"])
            results = await play_full_episode(client, spider_catalog, question_id)
            assert results[-1].structuredContent["reward"] == 1.0

    async with anyio.create_task_group() as group:
        for index in range(4):
            group.start_soon(client_run, index)
    assert len({episode for episode, _ in seen.values()}) == 4
    for index, (_, question) in seen.items():
        assert question == spider_catalog.question(f"{DEV}:{index * 10}").text
    assert server.health()["episodes"]["active"] == 0


async def test_client_that_disconnects_mid_episode_has_its_episode_closed(http_server):
    server = http_server()
    async with http_client(server.url) as client:
        await client.call_tool("start_episode", {"seed": 1})
        await client.call_tool("query", {"sql": "SELECT 1"})
        assert server.health()["episodes"]["active"] == 1
    health = server.health()["episodes"]
    assert (health["active"], health["closed"], health["steps"]) == (0, 1, 1)


def test_http_guards_hosts_origins_and_tokens(http_server):
    server = http_server("--auth-token", "s3cret")
    headers, body = MCP_HEADERS, MCP_INITIALIZE
    url = f"{server.url}/mcp"
    assert httpx.post(url, json=body, headers=headers).status_code == 401
    authorised = {**headers, "Authorization": "Bearer s3cret"}
    assert (
        httpx.post(url, json=body, headers={**authorised, "Host": "evil.example"}).status_code
        == 421
    )
    evil_origin = {**authorised, "Origin": "http://evil.example"}
    assert httpx.post(url, json=body, headers=evil_origin).status_code == 403
    assert httpx.post(url, json=body, headers=authorised).status_code == 200
    assert httpx.get(f"{server.url}/health").status_code == 200


def test_the_front_page_says_where_mcp_and_health_are(http_server):
    server = http_server()
    front = httpx.get(server.url)
    assert front.status_code == 200
    assert "/mcp" in front.text and "/health" in front.text
    assert httpx.get(server.url, headers={"Host": "evil.example"}).status_code == 421


def test_a_host_named_without_its_port_is_accepted_as_with_it(http_server):
    """A client leaves the default port out of the Host header: behind a TLS proxy on 443,
    or a server on port 80."""
    server = http_server("--allowed-host", "sql.example.org:*")
    url, body = f"{server.url}/mcp", MCP_INITIALIZE
    for host in ("sql.example.org", "sql.example.org:443", "localhost", "127.0.0.1"):
        origin = f"https://{host}"
        headers = {**MCP_HEADERS, "Host": host, "Origin": origin}
        assert httpx.post(url, json=body, headers=headers).status_code == 200, host
    for host in ("sql.example.org.evil", "evil.example", "example.org"):
        assert httpx.post(url, json=body, headers={**MCP_HEADERS, "Host": host}).status_code == 421


def test_bad_start_up_is_a_clear_error(tmp_path):
    import subprocess

    result = subprocess.run(
        [sys.executable, "-m", "sqlenv_mcp", "--data-dir", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert "no such directory" in result.stderr and result.stdout == ""


def test_the_server_reports_the_package_version(http_server):
    from importlib.metadata import version

    server = http_server()
    reply = httpx.post(f"{server.url}/mcp", json=MCP_INITIALIZE, headers=MCP_HEADERS)
    info = mcp_reply(reply.text)["result"]["serverInfo"]
    assert info == {"name": "sqlenv", "version": version("sqlenv-mcp")}


def test_http_calls_are_answered_as_json_on_the_connection_that_holds_the_episode(http_server):
    server = http_server()
    url = f"{server.url}/mcp"
    opened = [httpx.post(url, json=MCP_INITIALIZE, headers=MCP_HEADERS) for _ in range(2)]
    sessions = [reply.headers["mcp-session-id"] for reply in opened]
    assert len(set(sessions)) == 2
    assert all(reply.headers["content-type"] == "application/json" for reply in opened)
    started = []
    for session in sessions:
        headers = {**MCP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        httpx.post(
            url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
        )
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        call["params"] = {"name": "start_episode", "arguments": {"seed": 3}}
        reply = httpx.post(url, json=call, headers=headers)
        assert reply.headers["content-type"] == "application/json"
        started.append(reply.json()["result"]["structuredContent"]["episode_id"])
        call["params"] = {"name": "query", "arguments": {"sql": "SELECT 7"}}
        result = httpx.post(url, json=call, headers=headers).json()["result"]
        assert result["structuredContent"]["episode_id"] == started[-1]
        assert result["structuredContent"]["data"]["rows"] == [[7]]
    assert started[0] != started[1]
    assert server.health()["episodes"]["active"] == 2
