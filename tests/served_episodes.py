"""Talking to a running server, for the tests and benchmarks: an episode through its door (MCP
over streamable HTTP or OpenEnv over its WebSocket, one call shape for both), and the raw MCP
request that opens a connection, as a hand-made client sends it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

Call = Callable[[str, dict], Awaitable[str]]

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
MCP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


def mcp_reply(body: str) -> dict:
    """The JSON-RPC message of a reply to a raw MCP POST, sent as one JSON body or as a
    server-sent event (the server may answer either way)."""
    for line in body.splitlines():
        if line.startswith("data: "):
            return json.loads(line.removeprefix("data: "))
    return json.loads(body)


@asynccontextmanager
async def episode(door: str, url: str, db: str, token: str | None = None) -> AsyncIterator[Call]:
    """An episode on `db` through the door ("mcp" or "openenv"; `token`: the MCP server's
    bearer token); yields call(tool, arguments) -> the text shown."""
    if door == "mcp":
        import httpx
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {token}"} if token else None
        async with (
            httpx.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.call_tool("start_episode", {"db_id": db, "seed": 0})

            async def call(tool: str, arguments: dict) -> str:
                return (await session.call_tool(tool, arguments)).content[0].text

            yield call
        return
    from doors.openenv.client import SQLEnvClient

    async with SQLEnvClient(base_url=url) as env:
        await env.reset(db_id=db, seed=0)

        async def call(tool: str, arguments: dict) -> str:
            return (await env.call(tool, **arguments)).observation.text

        yield call
