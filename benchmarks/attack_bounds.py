"""What each resource attack costs a real server, and what the bounds cost a normal query.

A `sqlenv-mcp --transport http` (or `sqlenv-openenv`) process on 127.0.0.1 serves Spider dev.
First a normal query's p50: in process without the sandbox (before), in process with it
(after), and through the server, with the ratio after/before. Then, for each attack class, the
wall time and the growth of the server's resident memory (its process and its SQL workers) at
the peak and one second after, for one attack and for four at once: tool calls
(tests/adversarial.py: compile blow-ups, wide rows, an uninterruptible row, hostile answers),
then requests (connection floods, oversized bodies and values, malformed WebSocket frames).

    python benchmarks/attack_bounds.py --data-dir ../shared/data/spider [--door openenv]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import websockets

# The repository before tests/, so the namespace tests/doors never shadows the doors package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from adversarial import CONCERT, HOSTILE_ANSWERS, RESOURCE_ATTACKS
from process_memory import MIB, PeakRSS, tree_rss
from served_episodes import MCP_HEADERS, MCP_INITIALIZE, episode

from env_core.executor import ReadOnlyExecutor
from env_core.reuse import KEPT
from env_core.sandbox import Sandbox
from serving.local_server import LocalServer

NORMAL_SQL = "SELECT Name, Age FROM singer ORDER BY Age DESC"
UNINTERRUPTIBLE_ROW = (
    "WITH s(a, b) AS (SELECT hex(zeroblob(9999)), hex(zeroblob(2500)) || '1') SELECT "
    + ", ".join(["instr(a, b)"] * 600)
    + " FROM s"
)
SERVERS = {
    "mcp": (["sqlenv_mcp", "--transport", "http"], "/health"),
    "openenv": (["doors.commands"], "/health"),
}
Attack = Callable[[str], Awaitable[str]]  # one attack on the server at this URL -> outcome


def tool_attack(door: str, tool: str, arguments: dict) -> Attack:
    """One tool call in an episode of its own; the wall time counts the call alone. A query is
    sent with new text each time (a numbered comment), as an attacker would: the same text
    would share one run, or be given the result kept from the last."""
    sent = itertools.count()

    async def attack(url: str) -> str:
        varied = dict(arguments)
        if tool == "query":
            varied["sql"] = f"{arguments['sql']} -- {next(sent)}"
        async with episode(door, url, CONCERT) as call:
            await call("query", {"sql": "SELECT 1"})
            return (await call(tool, varied)).splitlines()[0]

    return attack


async def connection_flood(url: str) -> str:
    """500 MCP connections opened and never ended."""
    async with httpx.AsyncClient() as http:
        replies = [
            await http.post(f"{url}/mcp", json=MCP_INITIALIZE, headers=MCP_HEADERS)
            for _ in range(500)
        ]
    refused = sum(reply.status_code == 429 for reply in replies)
    return f"{500 - refused} opened, {refused} refused (429)"


async def streamed_body(url: str) -> str:
    """100 MB posted to /reset with no declared length."""

    async def chunks():
        for _ in range(100):
            yield b" " * (1 << 20)

    async with httpx.AsyncClient() as http:
        reply = await http.post(f"{url}/reset", content=chunks())
    return f"HTTP {reply.status_code}"


async def long_value(url: str) -> str:
    """A 900 KB question id, under the body limit: how much of it comes back."""
    async with httpx.AsyncClient() as http:
        reply = await http.post(f"{url}/reset", json={"question_id": "x" * 900_000})
    return f"HTTP {reply.status_code}, {len(reply.content)} bytes back"


async def session_flood(url: str) -> str:
    """200 OpenEnv sessions created over HTTP and never attached or closed."""
    create = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}
    async with httpx.AsyncClient() as http:
        replies = [(await http.post(f"{url}/mcp", json=create)).json() for _ in range(200)]
    refused = sum("error" in reply for reply in replies)
    return f"{200 - refused} created, {refused} refused"


async def malformed_frames(url: str) -> str:
    """1,000 WebSocket frames that are not messages, then a reset on the same socket."""
    async with websockets.connect(f"{url.replace('http', 'ws')}/ws") as socket:
        for _ in range(1_000):
            await socket.send("[1, 2]")
            await socket.recv()
        await socket.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        return f"session alive: {json.loads(await socket.recv())['type']}"


def attacks(door: str) -> list[tuple[str, Attack]]:
    calls = [(a.id, tool_attack(door, "query", {"sql": a.sql})) for a in RESOURCE_ATTACKS]
    calls.append(("uninterruptible_row", tool_attack(door, "query", {"sql": UNINTERRUPTIBLE_ROW})))
    calls += [
        (name, tool_attack(door, "answer", {"value": value}))
        for name, value in HOSTILE_ANSWERS.items()
    ]
    if door == "mcp":
        return [*calls, ("connection_flood", connection_flood)]
    # Floods last: they hold this client's share of connections until they idle out.
    requests = [("body_100mb", streamed_body), ("long_question_id", long_value)]
    requests += [("malformed_frames", malformed_frames), ("session_flood", session_flood)]
    return calls + requests


async def measure(
    attack: Attack, url: str, pid: int, copies: int
) -> tuple[float, float, float, str]:
    """Wall time, peak and kept growth (MiB) of `copies` attacks at once, and one outcome."""
    started = time.monotonic()
    with PeakRSS(pid) as peak:
        outcomes = await asyncio.gather(*(attack(url) for _ in range(copies)))
    wall = time.monotonic() - started
    await asyncio.sleep(1.0)
    kept = (tree_rss(pid) - peak.before) / MIB
    return wall, peak.growth_mib, kept, outcomes[0]


async def attack_table(door: str, server: LocalServer) -> None:
    pid = server.process.pid
    print(f"{door} server, {tree_rss(pid) / MIB:.0f} MiB resident with its workers at rest")
    print(f"{'class':<28}{'copies':>7}{'wall s':>8}{'peak +MiB':>11}{'kept +MiB':>11}  outcome")
    for name, attack in attacks(door):
        for copies in (1, 4):
            wall, peak, kept, text = await measure(attack, server.url, pid, copies)
            print(f"{name:<28}{copies:>7}{wall:>8.2f}{peak:>11.0f}{kept:>11.0f}  {text[:60]}")


@contextlib.contextmanager
def nothing_kept() -> Iterator[None]:
    """No result is kept meanwhile (a result evicted from `KEPT` is in this case)."""
    bound = KEPT.max_result_bytes
    KEPT.max_result_bytes = -1
    try:
        yield
    finally:
        KEPT.max_result_bytes = bound


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
    calls = itertools.count()
    old = p50_us(lambda: before.query(NORMAL_SQL), rounds)
    # New text each call: the sandbox runs every one. A repeated one is answered with its kept
    # result (env_core.reuse.KeptResults), or, when none is kept, runs in process once the
    # sandbox has proven it cheap (ProvenStatements).
    new = p50_us(lambda: after.query(f"{NORMAL_SQL} -- call {next(calls)}"), rounds)
    kept = p50_us(lambda: after.query(NORMAL_SQL), rounds)
    with nothing_kept():
        again = f"{NORMAL_SQL} -- again"
        after.query(again)
        proven = p50_us(lambda: after.query(again), rounds)
    async with episode(door, server.url, CONCERT) as call:
        samples = []
        for _ in range(rounds):
            started = time.perf_counter_ns()
            await call("query", {"sql": NORMAL_SQL})
            samples.append((time.perf_counter_ns() - started) / 1000)
    sandbox.close()
    print(f"normal query p50 ({rounds} rounds): {NORMAL_SQL}")
    print(f"  in process, no sandbox (before): {old:8.1f} µs")
    print(f"  in process, sandbox (after):     {new:8.1f} µs   ratio {new / old:.2f}x")
    print(f"  … the same text again (kept):    {kept:8.1f} µs   ratio {kept / old:.2f}x")
    print(f"  … again, nothing kept (proven):  {proven:8.1f} µs   ratio {proven / old:.2f}x")
    print(f"  through the {door} server:{'':<8}{statistics.median(samples):8.1f} µs\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--split", default="dev_without_wta_1")
    parser.add_argument("--door", choices=sorted(SERVERS), default="mcp")
    parser.add_argument("--rounds", type=int, default=500)
    args = parser.parse_args()
    module, health = SERVERS[args.door]
    command = [sys.executable, "-m", *module, "--max-steps", "1000"]
    command += ["--data-dir", str(args.data_dir), "--split", args.split]
    server = LocalServer(command, health)
    try:
        # The normal query first: the floods leave this client its full share of connections
        # in use until they idle out.
        database = args.data_dir / "database" / CONCERT / f"{CONCERT}.sqlite"
        asyncio.run(normal_query_table(args.door, server, database, args.rounds))
        asyncio.run(attack_table(args.door, server))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
