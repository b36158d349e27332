"""MCP tool-call latency, client to server and back, measured in one run.

One client holds these sessions at once: sqlenv-mcp over stdio, the same with
--no-output-schemas, the same over streamable HTTP, and `mcp-server-sqlite` (PyPI; the archived
reference SQLite server) over stdio, serving a copy of the same database. The sqlenv-mcp
sessions are opened for each `--server-python` (the Python of an environment: its mcp SDK
serves; by default this one), and, when this client and that server are on mcp 2.x, again in
the 2026-07-28 protocol (rows marked 2026; the others are the handshake era). Every round makes the
same calls on each in turn: `noop` (a tool on the same server that does nothing and returns a
result of the same shape: the SDK floor), `noop_plain` (the same without an output schema),
`describe`, `sample` and `query` (a Spider gold query), and on the reference `read_query` with
the same SQL. Prints p50/p99 and the ratios.

    python benchmarks/bench_mcp.py --data-dir ../shared/data/spider
    .venv-mcp2/bin/python benchmarks/bench_mcp.py --data-dir ../shared/data/spider \
        --server-python .venv/bin/python .venv-mcp2/bin/python \
        --reference .venv/bin/mcp-server-sqlite
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from serving.local_server import LocalServer

FLOOR_SERVER = Path(__file__).with_name("mcp_floor_server.py")
QUESTION = "dev_without_wta_1:1"  # concert_singer: names, countries and ages of singers
MAX_STEPS = 1000  # the largest budget the server allows
ROUNDS_PER_EPISODE = MAX_STEPS // 3  # three of a round's calls are episode steps
CURRENT = "2026-07-28"  # the sessionless protocol, which mcp 2.x speaks


def major(python: str) -> int:
    """The mcp SDK's major version in the environment of `python`."""
    code = "from importlib.metadata import version; print(version('mcp'))"
    return int(subprocess.check_output([python, "-c", code], text=True).partition(".")[0])


@asynccontextmanager
async def stdio_session(command: list[str], era: str = "legacy") -> AsyncIterator[Any]:
    params = StdioServerParameters(command=command[0], args=command[1:])
    if era == CURRENT:
        from mcp import Client

        async with Client(stdio_client(params), mode=era) as client:
            yield client
        return
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(python: str, server_args: list[str], era: str = "legacy"):
    command = [python, str(FLOOR_SERVER), *server_args, "--transport", "http"]
    server = LocalServer(command, "/health")
    try:
        if era == CURRENT:
            from mcp import Client

            async with Client(f"{server.url}/mcp", mode=era) as client:
                yield client
            return
        async with (
            streamable_http_client(f"{server.url}/mcp") as (read, write, *_),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
    finally:
        server.stop()


async def timed(session: Any, tool: str, arguments: dict, handle: dict) -> float:
    started = time.perf_counter()
    result = await session.call_tool(tool, arguments | handle)
    elapsed = (time.perf_counter() - started) * 1000
    if getattr(result, "isError", None) or getattr(result, "is_error", None):
        raise RuntimeError(f"{tool} failed: {result.content[0].text}")
    return elapsed


async def start(session: Any) -> dict:
    """The episode's handle: the arguments naming it, for a session that has no current one."""
    result = await session.call_tool("start_episode", {"question_id": QUESTION})
    structured = getattr(result, "structuredContent", None) or result.structured_content
    return {"episode_id": structured["episode_id"]}


def calls_of(sql: str) -> dict[str, dict]:
    return {
        "noop_plain": {},
        "noop": {},
        "describe": {"table": "singer"},
        "sample": {"table": "singer"},
        "query": {"sql": sql},
    }


async def measure(
    sessions: dict[str, Any], reference: Any, sql: str, rounds: int
) -> tuple[dict[str, dict[str, list[float]]], list[float]]:
    """Each round makes every call on every session in turn, so that the load the machine's
    other work puts on them is shared alike. A server has slept through the other sessions'
    turns, so an untimed call wakes it first: no tool pays for being called first. Every
    episode call names its episode (as a sessionless client must; a session's current episode
    is the same one)."""
    timings: dict[str, dict[str, list[float]]] = {door: defaultdict(list) for door in sessions}
    handles: dict[str, dict] = {}
    reference_times = []
    for round_ in range(rounds):
        await reference.call_tool("list_tables", {})
        reference_times.append(await timed(reference, "read_query", {"query": sql}, {}))
        for door, session in sessions.items():
            await session.call_tool("noop_plain", {})
            if round_ % ROUNDS_PER_EPISODE == 0:
                handles[door] = await start(session)
            for tool, arguments in calls_of(sql).items():
                handle = {} if tool.startswith("noop") else handles[door]
                timings[door][tool].append(await timed(session, tool, arguments, handle))
    return timings, reference_times


def p(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1]


def report(
    door: str, timings: dict[str, list[float]], floor_tool: str, reference: list[float]
) -> None:
    floor = p(timings[floor_tool], 50)
    for tool, samples in timings.items():
        versus = f"{p(samples, 50) / p(reference, 50):>9.2f}x"
        print(
            f"{door:<18}{tool:<20}{p(samples, 50):>8.3f}{p(samples, 99):>8.3f}"
            f"{p(samples, 50) / floor:>9.2f}x{versus}"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--server-python", nargs="+", default=[sys.executable])
    parser.add_argument(
        "--reference", default=str(Path(sys.executable).with_name("mcp-server-sqlite"))
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from env_core.catalog import Catalog

    catalog = Catalog.load(args.data_dir, ["dev_without_wta_1"])
    question = catalog.question(QUESTION)
    server_args = [
        "--data-dir",
        str(args.data_dir),
        "--split",
        "dev_without_wta_1",
        "--max-steps",
        str(MAX_STEPS),
    ]
    client_major = int(version("mcp").partition(".")[0])

    with tempfile.TemporaryDirectory() as scratch:
        # mcp-server-sqlite opens its file read-write: give it a copy, never the Spider file.
        copy = Path(scratch) / "concert_singer.sqlite"
        shutil.copyfile(catalog.database_path(question.db_id), copy)
        async with AsyncExitStack() as stack:
            reference = await stack.enter_async_context(
                stdio_session([args.reference, "--db-path", str(copy)])
            )
            sessions = {}
            for python in args.server_python:
                sdk = major(python)
                eras = ["legacy", CURRENT] if sdk >= 2 and client_major >= 2 else ["legacy"]
                for era in eras:
                    name = f"mcp{sdk} {'2026' if era == CURRENT else 'hs'}"
                    floor = [python, str(FLOOR_SERVER), *server_args]
                    sessions[f"{name} stdio"] = await stack.enter_async_context(
                        stdio_session(floor, era)
                    )
                    sessions[f"{name} stdio*"] = await stack.enter_async_context(
                        stdio_session([*floor, "--no-output-schemas"], era)
                    )
                    sessions[f"{name} http"] = await stack.enter_async_context(
                        http_session(python, server_args, era)
                    )
            timings, reference_times = await measure(sessions, reference, question.sql, args.rounds)

    print(
        f"{args.rounds} rounds; latency in ms, client call to result (client: mcp {version('mcp')})"
    )
    print("vs floor: against `noop` (same output schema) or, without schemas, `noop_plain`;")
    print("vs ref: against mcp-server-sqlite's read_query over stdio")
    print("door: server SDK, era (hs: handshake, 2026: 2026-07-28), transport")
    print(f"{'door':<18}{'tool':<20}{'p50':>8}{'p99':>8}{'vs floor':>10}{'vs ref':>10}")
    report(
        "reference stdio",
        {"mcp-server-sqlite": reference_times},
        "mcp-server-sqlite",
        reference_times,
    )
    for door, door_timings in timings.items():
        if door.endswith("*"):
            del door_timings["noop"]
            report(door, door_timings, "noop_plain", reference_times)
        else:
            report(door, door_timings, "noop", reference_times)
    print("stdio*: sqlenv-mcp --no-output-schemas")


if __name__ == "__main__":
    anyio.run(main)
