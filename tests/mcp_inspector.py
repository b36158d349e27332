"""The official MCP Inspector (CLI mode, from npm in node_modules), for tests of any server."""

import json
import subprocess
from pathlib import Path

import pytest

INSPECTOR = Path(__file__).resolve().parents[1] / "node_modules" / ".bin" / "mcp-inspector"
EPISODE_TOOLS = ["start_episode", "answer", "describe", "query", "sample", "end_episode"]


def require_inspector() -> str:
    if not INSPECTOR.exists():
        pytest.fail(f"{INSPECTOR} is missing: run `npm ci` (make test does) to install it")
    return str(INSPECTOR)


def run(inspector: str, *args: str) -> dict:
    done = subprocess.run([inspector, "--cli", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def http(url: str) -> list[str]:
    return [f"{url}/mcp", "--transport", "http"]


def list_tools(inspector: str, target: list[str]) -> list[str]:
    return [tool["name"] for tool in run(inspector, *target, "--method", "tools/list")["tools"]]


def call_tool(inspector: str, target: list[str], tool: str, argument: str) -> dict:
    call = ["--method", "tools/call", "--tool-name", tool, "--tool-arg", argument]
    return run(inspector, *target, *call)
