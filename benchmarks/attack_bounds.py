"""What each resource attack costs a real server, and what the bounds cost a normal query.

A `sqlenv-mcp --transport http` (or `sqlenv-openenv`) process on 127.0.0.1 serves Spider dev.
For each attack class (tests/adversarial.py: compile blow-ups, wide rows, an uninterruptible
row, hostile answers) it prints the wall time and the growth of the server's resident memory
(its process and its SQL workers) at the peak and one second after, for one call and for four
at once. Then a normal query's p50: in process without the sandbox (before), in process with it
(after), and through the server, with the ratio after/before.

    python benchmarks/attack_bounds.py --data-dir ../shared/data/spider [--door openenv]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from adversarial import CONCERT, HOSTILE_ANSWERS, RESOURCE_ATTACKS

from env_core.executor import ReadOnlyExecutor
from env_core.sandbox import Sandbox
from evals.local_server import LocalServer, free_port

MIB = 1 << 20
NORMAL_SQL = "SELECT Name, Age FROM singer ORDER BY Age DESC"
UNINTERRUPTIBLE_ROW = (
    "WITH s(a, b) AS (SELECT hex(zeroblob(9999)), hex(zeroblob(2500)) || '1') SELECT "
    + ", ".join(["instr(a, b)"] * 600)
    + " FROM s"
)
Call = Callable[[str, dict], Awaitable[str]]
SERVERS = {
    "mcp": (["sqlenv_mcp", "--transport", "http"], "/healthz"),
    "openenv": (["adapters.openenv.server"], "/health"),
}


def tree_rss(pid: int) -> int:
    process = psutil.Process(pid)
    total = process.memory_info().rss
    for child in process.children(recursive=True):
        with suppress(psutil.NoSuchProcess):  # it exited meanwhile
            total += child.memory_info().rss
    return total


class Peak:
    """The largest tree RSS seen while the block runs, sampled every 5 ms."""

    def __init__(self, pid: int) -> None:
        self.pid, self.bytes = pid, 0
        self._stop = threading.Event()

    def __enter__(self) -> Peak:
        self.before = self.bytes = tree_rss(self.pid)
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.bytes = max(self.bytes, tree_rss(self.pid))
            time.sleep(0.005)


@asynccontextmanager
async def episode(door: str, url: str) -> AsyncIterator[Call]:
    if door == "mcp":
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        async with (
            streamable_http_client(f"{url}/mcp") as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.call_tool("start_episode", {"db_id": CONCERT, "seed": 0})

            async def call(tool: str, arguments: dict) -> str:
                return (await session.call_tool(tool, arguments)).content[0].text

            yield call
        return
    from adapters.openenv.client import SQLEnvClient

    async with SQLEnvClient(base_url=url) as env:
        await env.reset(db_id=CONCERT, seed=0)

        async def call(tool: str, arguments: dict) -> str:
            return (await env.call(tool, **arguments)).observation.text

        yield call


async def attack(door: str, url: str, tool: str, arguments: dict) -> tuple[float, str]:
    async with episode(door, url) as call:
        await call("query", {"sql": "SELECT 1"})
        started = time.monotonic()
        text = await call(tool, arguments)
        return time.monotonic() - started, text.splitlines()[0]


async def measure(door: str, url: str, pid: int, tool: str, arguments: dict, copies: int):
    with Peak(pid) as peak:
        outcomes = await asyncio.gather(
            *(attack(door, url, tool, arguments) for _ in range(copies))
        )
    await asyncio.sleep(1.0)
    kept = tree_rss(pid) - peak.before
    wall = max(elapsed for elapsed, _ in outcomes)
    return wall, (peak.bytes - peak.before) / MIB, kept / MIB, outcomes[0][1]


def classes() -> list[tuple[str, str, dict]]:
    cases = [(a.id, "query", {"sql": a.sql}) for a in RESOURCE_ATTACKS]
    cases.append(("uninterruptible_row", "query", {"sql": UNINTERRUPTIBLE_ROW}))
    cases += [(name, "answer", {"value": value}) for name, value in HOSTILE_ANSWERS.items()]
    return cases


async def attack_table(door: str, server: LocalServer) -> None:
    pid = server.process.pid
    print(f"{door} server, {tree_rss(pid) / MIB:.0f} MiB resident with its workers at rest")
    print(f"{'class':<28}{'copies':>7}{'wall s':>8}{'peak +MiB':>11}{'kept +MiB':>11}  outcome")
    for name, tool, arguments in classes():
        for copies in (1, 4):
            wall, peak, kept, text = await measure(door, server.url, pid, tool, arguments, copies)
            print(f"{name:<28}{copies:>7}{wall:>8.2f}{peak:>11.0f}{kept:>11.0f}  {text[:60]}")


def p50_us(run: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter_ns()
        run()
        samples.append((time.perf_counter_ns() - started) / 1000)
    return statistics.median(samples)


async def normal_query_table(door: str, server: LocalServer, database: Path, rounds: int) -> None:
    before = ReadOnlyExecutor(database)
    sandbox = Sandbox()
    after = ReadOnlyExecutor(database, sandbox=sandbox)
    after.query(NORMAL_SQL)
    old = p50_us(lambda: before.query(NORMAL_SQL), rounds)
    new = p50_us(lambda: after.query(NORMAL_SQL), rounds)
    async with episode(door, server.url) as call:
        samples = []
        for _ in range(rounds):
            started = time.perf_counter_ns()
            await call("query", {"sql": NORMAL_SQL})
            samples.append((time.perf_counter_ns() - started) / 1000)
    sandbox.close()
    print(f"\nnormal query p50 ({rounds} rounds): {NORMAL_SQL}")
    print(f"  in process, no sandbox (before): {old:8.1f} µs")
    print(f"  in process, sandbox (after):     {new:8.1f} µs   ratio {new / old:.2f}x")
    print(f"  through the {door} server:{'':<8}{statistics.median(samples):8.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--split", default="dev_without_wta_1")
    parser.add_argument("--door", choices=sorted(SERVERS), default="mcp")
    parser.add_argument("--rounds", type=int, default=500)
    args = parser.parse_args()
    port = free_port()
    module, health = SERVERS[args.door]
    command = [sys.executable, "-m", *module, "--port", str(port), "--max-steps", "1000"]
    command += ["--data-dir", str(args.data_dir), "--split", args.split]
    server = LocalServer(command, port, health)
    try:
        asyncio.run(attack_table(args.door, server))
        database = args.data_dir / "database" / CONCERT / f"{CONCERT}.sqlite"
        asyncio.run(normal_query_table(args.door, server, database, args.rounds))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
