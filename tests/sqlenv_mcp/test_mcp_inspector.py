"""The official MCP Inspector (CLI mode, from npm) against our stdio and HTTP servers."""

import sys

import pytest
from mcp_inspector import EPISODE_TOOLS, call_tool, http, list_tools, require_inspector, run


@pytest.fixture(scope="module")
def inspector():
    return require_inspector()


@pytest.fixture
def concert_db(spider_dir):
    return spider_dir / "database" / "concert_singer" / "concert_singer.sqlite"


def stdio(*server_args: str) -> list[str]:
    return [sys.executable, "-m", "sqlenv_mcp", *server_args]


def test_stdio_episode_mode(inspector, spider_dir, cache_dir):
    server = stdio(
        "--data-dir", str(spider_dir), "--split", "dev_without_wta_1", "--cache-dir", str(cache_dir)
    )
    assert list_tools(inspector, server) == EPISODE_TOOLS
    started = call_tool(inspector, server, "start_episode", "question_id=dev_without_wta_1:0")
    assert started["content"][0]["text"].startswith("Question: How many singers do we have?")
    no_episode = call_tool(inspector, server, "query", "sql=SELECT 1")
    assert no_episode["isError"] is True
    assert "call start_episode first" in no_episode["content"][0]["text"]


def test_stdio_query_in_explorer_mode(inspector, concert_db):
    server = stdio("--db", str(concert_db))
    result = call_tool(inspector, server, "query", "sql=SELECT count(*) AS n FROM singer")
    assert result["content"][0]["text"] == "n\n6\n(1 row)"
    assert result["structuredContent"]["data"]["rows"] == [[6]]


def test_http_episode_and_explorer_modes(inspector, http_server, concert_db):
    assert list_tools(inspector, http(http_server().url)) == EPISODE_TOOLS
    explorer = http(http_server("--db", str(concert_db)).url)
    best = call_tool(
        inspector, explorer, "query", "sql=SELECT Name FROM singer ORDER BY Age DESC LIMIT 1"
    )
    assert best["content"][0]["text"] == "Name\nJoe Sharp\n(1 row)"
    rejected = call_tool(inspector, explorer, "query", "sql=DROP TABLE singer")
    assert rejected["isError"] is True and "Only read-only" in rejected["content"][0]["text"]


def test_an_episode_played_by_hand_as_docs_mcp_shows(inspector, http_server):
    # As `make run` serves: each Inspector command is a new MCP session, acting by episode id.
    server = http(http_server("--route-by-episode-id").url)
    started = call_tool(inspector, server, "start_episode", "seed=3")
    assert started["isError"] is False, started["content"][0]["text"]
    episode = f"episode_id={started['structuredContent']['episode_id']}"
    table = started["structuredContent"]["tables"][0]
    sampled = run(
        inspector, *server, "--method", "tools/call", "--tool-name", "sample",
        "--tool-arg", f"table={table}", "n=2", episode,
    )  # fmt: skip
    assert sampled["isError"] is False, sampled["content"][0]["text"]
    assert "(2 rows)" in sampled["content"][0]["text"]
    ended = call_tool(inspector, server, "end_episode", episode)
    assert ended["structuredContent"]["closed"] is True
