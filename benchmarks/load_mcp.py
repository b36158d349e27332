"""Load on the MCP HTTP server: N concurrent sessions, each playing a 10-step episode.

For each session count, a fresh `sqlenv-mcp --transport http` process on 127.0.0.1 serves
Spider dev; N clients (lean JSON-RPC over one keep-alive connection each, not the SDK
client, so the load generator stays cheap) each initialise a session, start an episode, make 9
more tool calls (describe, sample, queries, answer) and end the session. Prints success rate,
p50/p99 step latency, throughput and the server's resident memory per session, then the knee:
the first count where p99 exceeds 1 s or success drops below 99.9%. With --runaway, one more
session keeps sending a query that would run forever, to show the others' latency meanwhile.

    python benchmarks/load_mcp.py --data-dir ../shared/data/spider --sessions 64 256 1000
"""

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PROTOCOL = "2025-06-18"


@dataclass
class Tally:
    latencies_ms: list[float] = field(default_factory=list)
    steps_ok: int = 0
    steps_failed: int = 0
    errors: list[str] = field(default_factory=list)


class Session:
    """One MCP session over its own keep-alive connection (a shared httpx pool of hundreds of
    connections costs the load generator more CPU than the server spends)."""

    def __init__(self, url: str, tally: Tally, timeout_s: float) -> None:
        self.url, self.tally = url, tally
        self.client = httpx.AsyncClient(limits=httpx.Limits(max_connections=1), timeout=timeout_s)
        self.headers = dict(HEADERS)
        self.next_id = 0

    async def rpc(self, method: str, params: dict | None = None) -> dict | None:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        response = await self.client.post(self.url, json=body, headers=self.headers)
        response.raise_for_status()
        if "mcp-session-id" in response.headers:
            self.headers["mcp-session-id"] = response.headers["mcp-session-id"]
            self.headers["mcp-protocol-version"] = PROTOCOL
        for line in response.text.splitlines():
            if line.startswith("data:"):
                return json.loads(line[5:])
        return json.loads(response.text) if response.text else None

    async def open(self) -> None:
        await self.rpc(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "load", "version": "1"},
            },
        )
        notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self.client.post(self.url, json=notice, headers=self.headers)

    async def call(self, tool: str, arguments: dict) -> dict:
        started = time.perf_counter()
        try:
            reply = await self.rpc("tools/call", {"name": tool, "arguments": arguments})
            result = reply["result"]
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as error:
            self.tally.steps_failed += 1
            self.tally.errors.append(f"{tool}: {type(error).__name__}: {error}")
            raise
        self.tally.latencies_ms.append((time.perf_counter() - started) * 1000)
        self.tally.steps_ok += 1
        return result

    async def close(self) -> None:
        await self.client.delete(self.url, headers=self.headers)
        await self.client.aclose()


RUNAWAY_SQL = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"


async def run_away(session: Session, stop: asyncio.Event, took_ms: list[float]) -> None:
    """Keep sending a query that would run forever; each is cut at the server's deadline."""
    await session.open()
    await session.call("start_episode", {"seed": 0})
    while not stop.is_set():
        started = time.perf_counter()
        result = await session.call("query", {"sql": RUNAWAY_SQL})
        if "time limit" not in result["content"][0]["text"]:
            raise RuntimeError(f"the runaway query was not cut: {result}")
        took_ms.append((time.perf_counter() - started) * 1000)
        await session.call("end_episode", {})
        await session.call("start_episode", {"seed": 0})
    await session.close()


async def play(session: Session, seed: int) -> None:
    await session.open()
    start = await session.call("start_episode", {"seed": seed})
    tables = start["structuredContent"]["tables"]
    calls = [("describe", {"table": tables[0]}), ("sample", {"table": tables[0], "n": 3})]
    calls += [("query", {"sql": f'SELECT count(*) FROM "{t}"'}) for t in (tables * 6)[:6]]
    calls.append(("answer", {"value": "0"}))
    for tool, arguments in calls:
        await session.call(tool, arguments)
    await session.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def run_level(args: argparse.Namespace, sessions: int) -> dict:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "sqlenv_mcp",
        "--transport",
        "http",
        "--port",
        str(port),
        "--data-dir",
        str(args.data_dir),
        "--split",
        args.split,
        # One client (this one) runs every session.
        *("--max-episodes", str(sessions + 16)),
        *("--max-episodes-per-client", str(sessions + 16)),
        *("--max-connections-per-client", str(sessions + 16)),
    ]
    server = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        idle_rss = rss_kib(server.pid)
        peak_rss = idle_rss
        tally = Tally()
        runaway_ms: list[float] = []
        stop = asyncio.Event()
        url = f"{base}/mcp"
        runaway = asyncio.create_task(
            run_away(Session(url, Tally(), args.timeout), stop, runaway_ms)
            if args.runaway
            else asyncio.sleep(0)
        )
        started = time.perf_counter()
        tasks = [
            asyncio.create_task(play(Session(url, tally, args.timeout), seed))
            for seed in range(sessions)
        ]
        while not all(task.done() for task in tasks):
            peak_rss = max(peak_rss, rss_kib(server.pid))
            await asyncio.sleep(0.2)
        elapsed = time.perf_counter() - started
        failed_sessions = sum(1 for task in tasks if task.exception() is not None)
        stop.set()
        await runaway
        latencies = tally.latencies_ms
        return {
            "sessions": sessions,
            "success": 1 - failed_sessions / sessions,
            "p50": statistics.median(latencies) if latencies else float("nan"),
            "p99": statistics.quantiles(latencies, n=100)[98]
            if len(latencies) > 1
            else float("nan"),
            "throughput": tally.steps_ok / elapsed,
            "rss_per_session": (peak_rss - idle_rss) / sessions,
            "errors": tally.errors[:3],
            "runaway_ms": runaway_ms,
        }
    finally:
        server.terminate()
        server.wait()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--split", default="dev_without_wta_1")
    parser.add_argument("--sessions", type=int, nargs="+", default=[64, 256, 1000])
    parser.add_argument("--timeout", type=float, default=120.0, help="per request, seconds")
    parser.add_argument(
        "--runaway",
        action="store_true",
        help="one more session keeps sending a query that would run forever",
    )
    args = parser.parse_args()
    print(
        f"{'sessions':>9}{'success':>10}{'p50 ms':>9}{'p99 ms':>10}{'steps/s':>9}"
        f"{'KiB/session':>13}"
    )
    knee = None
    for sessions in args.sessions:
        level = await run_level(args, sessions)
        print(
            f"{level['sessions']:>9}{level['success']:>10.2%}{level['p50']:>9.1f}"
            f"{level['p99']:>10.1f}{level['throughput']:>9.0f}{level['rss_per_session']:>13.0f}"
        )
        for error in level["errors"]:
            print(f"    e.g. {error}")
        if level["runaway_ms"]:
            cut = level["runaway_ms"]
            print(
                f"    runaway queries: {len(cut)} cut at the deadline after "
                f"{min(cut):.0f}-{max(cut):.0f} ms"
            )
        if knee is None and (level["p99"] > 1000 or level["success"] < 0.999):
            knee = sessions
    print(f"knee (p99 > 1 s or success < 99.9%): {knee or 'not reached'}")


if __name__ == "__main__":
    asyncio.run(main())
