"""MCP tool-call latency, client to server and back, measured in one run.

One client holds four sessions at once: sqlenv-mcp over stdio, the same with
--no-output-schemas, the same over streamable HTTP, and `mcp-server-sqlite` (PyPI; the archived
reference SQLite server) over stdio, serving a copy of the same database. Every round makes the
same calls on each in turn: `noop` (a tool on the same server that does nothing and returns a
result of the same shape: the SDK floor), `noop_plain` (the same without an output schema),
`describe`, `sample` and `query` (a Spider gold query), and on the reference `read_query` with
the same SQL. Prints p50/p99 and the ratios.

    python benchmarks/bench_mcp.py --data-dir ../shared/data/spider
"""

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from serving.local_server import LocalServer

FLOOR_SERVER = Path(__file__).with_name("mcp_floor_server.py")
QUESTION = "dev_without_wta_1:1"  # concert_singer: names, countries and ages of singers
MAX_STEPS = 1000  # the largest budget the server allows
ROUNDS_PER_EPISODE = MAX_STEPS // 3  # three of a round's calls are episode steps


@asynccontextmanager
async def stdio_session(command: list[str]) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(server_args: list[str]) -> AsyncIterator[ClientSession]:
    command = [sys.executable, str(FLOOR_SERVER), *server_args, "--transport", "http"]
    server = LocalServer(command, "/health")
    try:
        async with (
            streamable_http_client(f"{server.url}/mcp") as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
    finally:
        server.stop()


async def timed(session: ClientSession, tool: str, arguments: dict) -> float:
    started = time.perf_counter()
    result = await session.call_tool(tool, arguments)
    elapsed = (time.perf_counter() - started) * 1000
    if result.isError:
        raise RuntimeError(f"{tool} failed: {result.content[0].text}")
    return elapsed


def calls_of(sql: str) -> dict[str, dict]:
    return {
        "noop_plain": {},
        "noop": {},
        "describe": {"table": "singer"},
        "sample": {"table": "singer"},
        "query": {"sql": sql},
    }


async def measure(
    sessions: dict[str, ClientSession], reference: ClientSession, sql: str, rounds: int
) -> tuple[dict[str, dict[str, list[float]]], list[float]]:
    """Each round makes every call on every session in turn, so that the load the machine's
    other work puts on them is shared alike."""
    timings: dict[str, dict[str, list[float]]] = {door: defaultdict(list) for door in sessions}
    reference_times = []
    for round_ in range(rounds):
        reference_times.append(await timed(reference, "read_query", {"query": sql}))
        for door, session in sessions.items():
            if round_ % ROUNDS_PER_EPISODE == 0:
                await session.call_tool("start_episode", {"question_id": QUESTION})
            for tool, arguments in calls_of(sql).items():
                timings[door][tool].append(await timed(session, tool, arguments))
    return timings, reference_times


def p(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1]


def report(
    transport: str, timings: dict[str, list[float]], floor_tool: str, reference: list[float]
) -> None:
    floor = p(timings[floor_tool], 50)
    for tool, samples in timings.items():
        versus = f"{p(samples, 50) / p(reference, 50):>9.2f}x"
        print(
            f"{transport:<7}{tool:<20}{p(samples, 50):>8.3f}{p(samples, 99):>8.3f}"
            f"{p(samples, 50) / floor:>9.2f}x{versus}"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=300)
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

    with tempfile.TemporaryDirectory() as scratch:
        # mcp-server-sqlite opens its file read-write: give it a copy, never the Spider file.
        copy = Path(scratch) / "concert_singer.sqlite"
        shutil.copyfile(catalog.database_path(question.db_id), copy)
        reference_command = [
            str(Path(sys.executable).with_name("mcp-server-sqlite")),
            "--db-path",
            str(copy),
        ]
        plain_command = [sys.executable, str(FLOOR_SERVER), *server_args, "--no-output-schemas"]
        async with (
            stdio_session(reference_command) as reference,
            stdio_session([sys.executable, str(FLOOR_SERVER), *server_args]) as stdio,
            stdio_session(plain_command) as plain,
            http_session(server_args) as http,
        ):
            sessions = {"stdio": stdio, "stdio*": plain, "http": http}
            timings, reference_times = await measure(sessions, reference, question.sql, args.rounds)

    print(f"{args.rounds} rounds; latency in ms, client call to result")
    print("vs floor: against `noop` (same output schema) or, without schemas, `noop_plain`;")
    print("vs ref: against mcp-server-sqlite's read_query over stdio")
    print(f"{'door':<7}{'tool':<20}{'p50':>8}{'p99':>8}{'vs floor':>10}{'vs ref':>10}")
    timings["stdio"]["mcp-server-sqlite"] = reference_times
    report("stdio", timings["stdio"], "noop", reference_times)
    del timings["stdio*"]["noop"]
    report("stdio*", timings["stdio*"], "noop_plain", reference_times)
    report("http", timings["http"], "noop", reference_times)
    print("stdio*: sqlenv-mcp --no-output-schemas")


if __name__ == "__main__":
    anyio.run(main)
