"""The server on mcp 2.x, through the mcp 2.x client, in both eras of the protocol: 2026-07-28
(no handshake, no session: each call acts on an episode by its id) and the handshake era
(`mode="legacy"`, protocol 2025-11-25: the connection's current episode), over stdio and
streamable HTTP.

Before, a client that speaks only 2026-07-28 could not play: over stdio its first call got
"Invalid request parameters", over HTTP a 400 (the server ran on mcp 1.x, which knows neither
the envelope nor `server/discover`)."""

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from env_core.answers import gold_as_json
from sqlenv_mcp.episodes import NO_SESSION
from sqlenv_mcp.sdk import PROTOCOL_VERSIONS

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[3]
DEV = "dev_without_wta_1"
CURRENT = "2026-07-28"
ERAS = {CURRENT: CURRENT, "legacy": "2025-11-25"}


def served_spider(spider_dir: Path, cache_dir: Path, *args: str) -> list[str]:
    return ["--data-dir", str(spider_dir), "--split", DEV, "--cache-dir", str(cache_dir), *args]


@asynccontextmanager
async def stdio(errlog: Path, mode: str, *args: str) -> AsyncIterator[Client]:
    """A 2.x client of a stdio server process (its stderr to `errlog`); the child gets PATH
    only, as hosts start servers."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "sqlenv_mcp", *args], env={"PATH": os.environ["PATH"]}
    )
    with errlog.open("w") as log:
        async with Client(stdio_client(params, errlog=log), mode=mode) as client:
            yield client


async def play(client: Client, catalog, question_id: str, by_handle: bool) -> None:
    """An oracle episode; `by_handle`: every call names the episode (else the connection's
    current episode is acted on)."""
    question = catalog.question(question_id)
    start = await client.call_tool("start_episode", {"question_id": question_id})
    assert not start.is_error, start.content
    handle = {"episode_id": start.structured_content["episode_id"]} if by_handle else {}
    table = start.structured_content["tables"][0]
    calls = [
        ("describe", {"table": table}),
        ("query", {"sql": question.sql}),
        ("answer", {"value": gold_as_json(question.gold)}),
    ]
    results = [await client.call_tool(tool, arguments | handle) for tool, arguments in calls]
    assert [result.is_error for result in results] == [False, False, False]
    assert results[-1].structured_content["data"] == {"correct": True}
    episode_ids = {result.structured_content["episode_id"] for result in results}
    assert episode_ids == {start.structured_content["episode_id"]}


@pytest.mark.parametrize("mode", ERAS)
async def test_a_full_episode_over_stdio(mode, spider_dir, cache_dir, spider_catalog, tmp_path):
    errlog = tmp_path / "stderr.log"
    async with stdio(errlog, mode, *served_spider(spider_dir, cache_dir)) as client:
        assert client.protocol_version == ERAS[mode]
        await play(client, spider_catalog, f"{DEV}:5", by_handle=mode == CURRENT)
    assert errlog.read_text() == ""


@pytest.mark.parametrize("mode", ERAS)
async def test_a_full_episode_over_http(mode, http_server, spider_catalog):
    server = http_server()
    async with Client(f"{server.url}/mcp", mode=mode) as client:
        assert client.protocol_version == ERAS[mode]
        await play(client, spider_catalog, f"{DEV}:7", by_handle=mode == CURRENT)
    episodes = server.health()["episodes"]
    # A session's episode ends with its session; a sessionless one stays until it expires.
    assert (episodes["created"], episodes["steps"]) == (1, 3)
    assert episodes["active"] == (1 if mode == CURRENT else 0)


async def test_a_sessionless_call_without_a_handle_is_told_to_pass_one(http_server):
    server = http_server()
    async with Client(f"{server.url}/mcp", mode=CURRENT) as client:
        started = await client.call_tool("start_episode", {"seed": 1})
        call = await client.call_tool("query", {"sql": "SELECT 1"})
    assert not started.is_error
    assert call.is_error and call.content[0].text == f"Error: {NO_SESSION}"
    assert server.health()["episodes"]["steps"] == 0


async def test_sessionless_episodes_are_capped_per_client(http_server):
    server = http_server("--max-episodes-per-client", "2")
    async with Client(f"{server.url}/mcp", mode=CURRENT) as client:
        starts = [await client.call_tool("start_episode", {"seed": seed}) for seed in range(3)]
    assert [start.is_error for start in starts] == [False, False, True]
    assert "episodes open" in starts[-1].content[0].text
    assert server.health()["episodes"]["active"] == 2


async def test_a_runaway_query_is_bounded_in_the_current_era(http_server):
    server = http_server("--query-timeout", "0.5")
    runaway = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"
    async with Client(f"{server.url}/mcp", mode=CURRENT) as client:
        start = await client.call_tool("start_episode", {"seed": 1})
        handle = {"episode_id": start.structured_content["episode_id"]}
        stopped = await client.call_tool("query", {"sql": runaway} | handle)
        after = await client.call_tool("query", {"sql": "SELECT 1"} | handle)
    # Stopped by the deadline, or by the SQL worker's memory budget if it comes first.
    assert stopped.structured_content["data"]["error"] in ("query_timeout", "query_rejected")
    assert not after.is_error


async def test_the_contract_is_the_same_in_both_eras(http_server, spider_dir, cache_dir, tmp_path):
    """Instructions, tools (names, descriptions, schemas, order), resources and prompts, over
    each transport, as a client of either era sees them."""
    server = http_server()
    seen = []
    for mode in ("auto", "legacy"):
        async with Client(f"{server.url}/mcp", mode=mode) as client:
            seen.append(await contract_of(client))
        async with stdio(tmp_path / "stderr.log", mode, *served_spider(spider_dir, cache_dir)) as c:
            seen.append(await contract_of(c))
    assert seen[0][0].startswith("Call start_episode first")
    assert all(contract == seen[0] for contract in seen)


async def contract_of(client: Client) -> tuple:
    tools = await client.list_tools()
    resources = await client.list_resources()
    prompts = await client.list_prompts()
    return (
        client.instructions,
        [tool.model_dump(by_alias=True, exclude_none=True) for tool in tools.tools],
        [resource.name for resource in resources.resources],
        [prompt.name for prompt in prompts.prompts],
    )


def test_the_docs_name_every_protocol_version_the_plain_install_speaks():
    lines = (ROOT / "docs" / "mcp.md").read_text().splitlines()
    row = next(line for line in lines if line.startswith("| `pip install .`"))
    assert [version for version in PROTOCOL_VERSIONS if version not in row] == []
    assert CURRENT in PROTOCOL_VERSIONS
