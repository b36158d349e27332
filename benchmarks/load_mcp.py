"""Load on the MCP HTTP server: N concurrent sessions, each playing a 10-step episode, against
the SDK's no-op floor under the same load.

For each session count, a fresh server process on 127.0.0.1 serves Spider dev: the floor
(`mcp_floor_server.py`: the same server with a `noop` tool) and ours (`sqlenv-mcp --transport
http`). N clients each open a session, make 10 tool calls and end the session. On ours the
calls are an episode (start_episode, describe, sample, six queries, answer); on the floor,
`noop` ten times. Clients speak HTTP/1.1 on one keep-alive connection each, with a minimal
hand-written client (an httpx client costs more CPU per request than the server does, so the
load generator, not the server, would set the pace on two cores). Prints success rate, p50/p99
call latency, calls per second, the server's CPU time per call (its process and its SQL
workers: the figure the machine's other load disturbs least) and its resident memory per
session, the ratios ours/floor, then the knee: the first count where ours has p99 over 1 s or
success below 99.9%. With --runaway, one more session keeps sending a query that would run
forever, to show the others' latency meanwhile. Each `--server-python` (the Python of an
environment, whose mcp SDK serves) is measured in the handshake era and, on mcp 2.x, in
2026-07-28 too: there a client has no session, sends each request with the protocol's envelope,
names its episode in every call and ends it with end_episode.

    python benchmarks/load_mcp.py --data-dir ../shared/data/spider --sessions 64 256 1000
    python benchmarks/load_mcp.py --data-dir ../shared/data/spider --sessions 64 \
        --server-python .venv/bin/python .venv-mcp2/bin/python
"""

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from serving.local_server import LocalServer

FLOOR_SERVER = Path(__file__).with_name("mcp_floor_server.py")
PROTOCOL = "2025-06-18"
CURRENT = "2026-07-28"  # the sessionless protocol, which mcp 2.x speaks
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": CURRENT,
    "io.modelcontextprotocol/clientCapabilities": {},
}
CALLS = 10  # per session


@dataclass
class Tally:
    latencies_ms: list[float] = field(default_factory=list)
    steps_ok: int = 0
    steps_failed: int = 0
    errors: list[str] = field(default_factory=list)


def refused_as_busy(result: dict) -> bool:
    """A call the server did not take because its SQL workers stayed busy: a failure here."""
    data = (result.get("structuredContent") or {}).get("data") or {}
    return data.get("error") == "server_busy"


class Session:
    """One MCP session over its own keep-alive HTTP/1.1 connection."""

    def __init__(self, url: str, tally: Tally, timeout_s: float, era: str = PROTOCOL) -> None:
        parts = urlsplit(url)
        self.sessionless = era == CURRENT
        self.handle: dict[str, str] = {}  # a sessionless client's episode, named in each call
        self.address = (parts.hostname, parts.port)
        self.path = parts.path
        self.tally, self.timeout_s = tally, timeout_s
        self.headers = {
            "Host": parts.netloc,
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        self.next_id = 0
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    def note(self, headers: dict[str, str]) -> None:
        """Called with every response's headers (lower-case names)."""
        if "mcp-session-id" in headers:
            self.headers["Mcp-Session-Id"] = headers["mcp-session-id"]
            self.headers["Mcp-Protocol-Version"] = PROTOCOL

    async def send(self, method: str, body: dict | None = None, **headers: str) -> bytes:
        """One HTTP request on the session's connection; the response body."""
        return await asyncio.wait_for(self._exchange(method, body, headers), self.timeout_s)

    async def _exchange(self, method: str, body: dict | None, extra: dict[str, str]) -> bytes:
        if self._writer is None or self._reader.at_eof():
            self._reader, self._writer = await asyncio.open_connection(*self.address)
        content = json.dumps(body).encode() if body is not None else b""
        headers = {**self.headers, **extra, "Content-Length": len(content)}
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self._writer.write(f"{method} {self.path} HTTP/1.1\r\n{head}\r\n".encode() + content)
        status, headers = await self._read_head()
        payload = await self._read_body(headers)
        if status >= 400:
            raise RuntimeError(f"HTTP {status}: {payload[:200]!r}")
        self.note(headers)
        return payload

    async def _read_head(self) -> tuple[int, dict[str, str]]:
        lines = (await self._reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.lower()] = value.strip()
        return int(lines[0].split()[1]), headers

    async def _read_body(self, headers: dict[str, str]) -> bytes:
        if headers.get("transfer-encoding") == "chunked":  # a server-sent event stream
            body = bytearray()
            while size := int((await self._reader.readline()).split(b";")[0], 16):
                body += await self._reader.readexactly(size)
                await self._reader.readline()
            await self._reader.readline()
            return bytes(body)
        return await self._reader.readexactly(int(headers.get("content-length", 0)))

    async def rpc(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        params = params or {}
        headers = {}
        if self.sessionless:
            params = {**params, "_meta": ENVELOPE}
            headers = {"Mcp-Protocol-Version": CURRENT, "Mcp-Method": method}
            if method == "tools/call":
                headers["Mcp-Name"] = params["name"]
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        return reply_of(await self.send("POST", body, **headers))

    async def open(self) -> None:
        if self.sessionless:  # no handshake, no session
            return
        client = {"name": "load", "version": "1"}
        await self.rpc(
            "initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": client}
        )
        await self.send("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self, tool: str, arguments: dict) -> dict:
        started = time.perf_counter()
        if tool != "start_episode":
            arguments = arguments | self.handle
        try:
            result = (await self.rpc("tools/call", {"name": tool, "arguments": arguments}))[
                "result"
            ]
            if self.sessionless and tool == "start_episode":
                self.handle = {"episode_id": result["structuredContent"]["episode_id"]}
            if refused_as_busy(result):
                raise RuntimeError("no SQL worker was free in time (server_busy)")
        except (OSError, RuntimeError, TimeoutError, KeyError, ValueError) as error:
            self.tally.steps_failed += 1
            self.tally.errors.append(f"{tool}: {type(error).__name__}: {error}")
            raise
        self.tally.latencies_ms.append((time.perf_counter() - started) * 1000)
        self.tally.steps_ok += 1
        return result

    async def close(self) -> None:
        try:
            if not self.sessionless:
                await self.send("DELETE")
            elif self.handle:
                await self.call("end_episode", {})
        finally:
            if self._writer is not None:
                self._writer.close()


def reply_of(body: bytes) -> dict:
    """The JSON-RPC message in a reply: one JSON body, or a server-sent event."""
    for line in body.splitlines():
        if line.startswith(b"data:"):
            return json.loads(line[5:])
    return json.loads(body)


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
    """An episode: start_episode and 9 calls, the last an answer."""
    await session.open()
    start = await session.call("start_episode", {"seed": seed})
    tables = start["structuredContent"]["tables"]
    calls = [("describe", {"table": tables[0]}), ("sample", {"table": tables[0], "n": 3})]
    calls += [("query", {"sql": f'SELECT count(*) FROM "{t}"'}) for t in (tables * 6)[:6]]
    calls.append(("answer", {"value": "0"}))
    for tool, arguments in calls:
        await session.call(tool, arguments)
    await session.close()


async def play_noop(session: Session, _seed: int) -> None:
    """The floor's session: as many calls, each to the SDK's no-op tool."""
    await session.open()
    for _ in range(CALLS):
        await session.call("noop", {})
    await session.close()


def cpu_s(process: psutil.Process) -> float:
    """CPU time of a process and of its children (the SQL workers), living and ended."""
    total = 0.0
    for each in [process, *process.children(recursive=True)]:
        try:
            times = each.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
        if each is process:
            total += times.children_user + times.children_system
    return total


@dataclass(frozen=True)
class Level:
    success: float
    p50: float
    p99: float
    calls_per_s: float
    cpu_ms_per_call: float
    rss_kib_per_session: float
    errors: list[str]
    runaway_ms: list[float]


def major(python: str) -> int:
    """The mcp SDK's major version in the environment of `python`."""
    code = "from importlib.metadata import version; print(version('mcp'))"
    return int(subprocess.check_output([python, "-c", code], text=True).partition(".")[0])


def server_command(args: argparse.Namespace, python: str, kind: str, sessions: int) -> list[str]:
    program = [str(FLOOR_SERVER)] if kind == "floor" else ["-m", "sqlenv_mcp"]
    return [
        *(python, *program, "--transport", "http"),
        *("--data-dir", str(args.data_dir), "--split", args.split),
        # One client (this one) runs every session.
        *("--max-episodes", str(sessions + 16)),
        *("--max-episodes-per-client", str(sessions + 16)),
        *("--max-sessions-per-client", str(sessions + 16)),
        *("--max-sockets-per-client", str(2 * sessions + 16)),
    ]


async def run_level(
    args: argparse.Namespace, python: str, era: str, kind: str, sessions: int
) -> Level:
    server = LocalServer(server_command(args, python, kind, sessions), "/health")
    try:
        process = psutil.Process(server.process.pid)
        idle_rss = process.memory_info().rss
        peak_rss = idle_rss
        tally = Tally()
        runaway_ms: list[float] = []
        stop = asyncio.Event()
        url = f"{server.url}/mcp"
        runaway = asyncio.create_task(
            run_away(Session(url, Tally(), args.timeout, era), stop, runaway_ms)
            if args.runaway and kind == "ours"
            else asyncio.sleep(0)
        )
        cpu_before = cpu_s(process)
        started = time.perf_counter()
        policy = play if kind == "ours" else play_noop
        tasks = [
            asyncio.create_task(policy(Session(url, tally, args.timeout, era), seed))
            for seed in range(sessions)
        ]
        while not all(task.done() for task in tasks):
            peak_rss = max(peak_rss, process.memory_info().rss)
            await asyncio.sleep(0.2)
        elapsed = time.perf_counter() - started
        cpu = cpu_s(process) - cpu_before
        failed_sessions = sum(1 for task in tasks if task.exception() is not None)
        stop.set()
        await runaway
        latencies = tally.latencies_ms
        return Level(
            success=1 - failed_sessions / sessions,
            p50=statistics.median(latencies) if latencies else float("nan"),
            p99=statistics.quantiles(latencies, n=100)[98] if len(latencies) > 1 else float("nan"),
            calls_per_s=tally.steps_ok / elapsed,
            cpu_ms_per_call=cpu * 1000 / max(tally.steps_ok, 1),
            rss_kib_per_session=(peak_rss - idle_rss) / 1024 / sessions,
            errors=tally.errors[:3],
            runaway_ms=runaway_ms,
        )
    finally:
        server.stop()


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
    parser.add_argument("--server-python", nargs="+", default=[sys.executable])
    args = parser.parse_args()
    print(f"{CALLS} tool calls per session; server CPU includes its SQL workers")
    print("server: floor or ours, the server's SDK, its era (hs: handshake, 2026: 2026-07-28)")
    print(
        f"{'sessions':>9}  {'server':<16}{'success':>9}{'p50 ms':>9}{'p99 ms':>10}"
        f"{'calls/s':>9}{'CPU ms/call':>13}{'KiB/session':>13}"
    )
    servers = [
        (python, era, f"mcp{sdk} {'2026' if era == CURRENT else 'hs'}")
        for python in args.server_python
        for sdk in [major(python)]
        for era in ([PROTOCOL, CURRENT] if sdk >= 2 else [PROTOCOL])
    ]
    knee = None
    for sessions in args.sessions:
        for python, era, name in servers:
            levels = {}
            for kind in ("floor", "ours"):
                level = levels[kind] = await run_level(args, python, era, kind, sessions)
                print(
                    f"{sessions:>9}  {kind + ' ' + name:<16}{level.success:>9.2%}"
                    f"{level.p50:>9.1f}{level.p99:>10.1f}{level.calls_per_s:>9.0f}"
                    f"{level.cpu_ms_per_call:>13.2f}{level.rss_kib_per_session:>13.0f}"
                )
                for error in level.errors:
                    print(f"    e.g. {error}")
            floor, ours = levels["floor"], levels["ours"]
            print(
                f"{sessions:>9}  {'ratio ' + name:<16}{'':>9}{ours.p50 / floor.p50:>8.2f}x"
                f"{ours.p99 / floor.p99:>9.2f}x{ours.calls_per_s / floor.calls_per_s:>8.2f}x"
                f"{ours.cpu_ms_per_call / floor.cpu_ms_per_call:>12.2f}x"
            )
            if ours.runaway_ms:
                cut = ours.runaway_ms
                print(
                    f"    runaway queries: {len(cut)} cut at the deadline after "
                    f"{min(cut):.0f}-{max(cut):.0f} ms"
                )
            if knee is None and (ours.p99 > 1000 or ours.success < 0.999):
                knee = f"{sessions} ({name})"
    print(f"knee of ours (p99 > 1 s or success < 99.9%): {knee or 'not reached'}")


if __name__ == "__main__":
    asyncio.run(main())
