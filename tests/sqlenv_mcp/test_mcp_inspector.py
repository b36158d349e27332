"""The official MCP Inspector (CLI mode, from npm) against our stdio and HTTP servers."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

INSPECTOR = Path(__file__).resolve().parents[2] / "node_modules" / ".bin" / "mcp-inspector"
EPISODE_TOOLS = ["start_episode", "describe", "sample", "query", "answer", "end_episode"]


@pytest.fixture(scope="module")
def inspector():
    if not INSPECTOR.exists():
        pytest.fail(f"{INSPECTOR} is missing: run `npm ci` (make test does) to install it")
    return str(INSPECTOR)


@pytest.fixture
def concert_db(spider_dir):
    return spider_dir / "database" / "concert_singer" / "concert_singer.sqlite"


def run(inspector: str, *args: str) -> dict:
    done = subprocess.run([inspector, "--cli", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def stdio(*server_args: str) -> list[str]:
    return [sys.executable, "-m", "sqlenv_mcp", *server_args]


def http(url: str) -> list[str]:
    return [f"{url}/mcp", "--transport", "http"]


def list_tools(inspector: str, target: list[str]) -> list[str]:
    return [tool["name"] for tool in run(inspector, *target, "--method", "tools/list")["tools"]]


def call_tool(inspector: str, target: list[str], tool: str, argument: str) -> dict:
    call = ["--method", "tools/call", "--tool-name", tool, "--tool-arg", argument]
    return run(inspector, *target, *call)


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
