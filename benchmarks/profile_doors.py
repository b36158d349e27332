"""Where each door's time goes, per call: py-spy samples of ours next to the framework's no-op.

For each door, one client makes the latency benchmarks' calls in turn (describe, sample and
query on Spider's concert_singer) while `py-spy record --gil` samples the process that serves
them: ours, then the floor (the same framework with a no-op tool or environment) under the
same calls. py-spy samples a process only while it holds the GIL, so waiting is left out; the
SQL worker processes are sampled with their server. Each sample is charged to the code of its
innermost frame, grouped by what it belongs to (the engine, the door, the SDK, the HTTP
server...), and shown as CPU microseconds per call. Sampling slows a process down: compare the
columns with one another, not with the latency benchmarks.

Doors: engine (`Episode.call` in process, against bare sqlite3 as bench_engine.py makes the
calls), mcp-stdio (the server and, separately, the client, which validates every structured
result), mcp-http (the server, JSON responses) and openenv (the WebSocket server).

    python benchmarks/profile_doors.py --data-dir ../shared/data/spider [--door openenv]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS.parent))
sys.path.insert(0, str(BENCHMARKS))

import bench_openenv  # noqa: E402
from bench_mcp import FLOOR_SERVER, QUESTION  # noqa: E402
from load_mcp import Session, Tally  # noqa: E402

PY_SPY = Path(sys.executable).with_name("py-spy")
RATE = 500  # samples per second
CALLS = bench_openenv.LATENCY_CALLS  # as bench_openenv makes them
SPLIT = "dev_without_wta_1"
ENGINE_CALLS = 10  # times --calls: an in-process call is short, and needs more to be sampled
# What the innermost frame's file belongs to: the first group whose pattern matches its path.
GROUPS = [
    ("SQL worker process", r"^WORKER"),
    ("engine: SQL in process", r"^env_core/(executor|read_only|result_budget|reuse|schemas)"),
    ("engine: SQL worker hop", r"^env_core/sandbox"),
    ("engine: text rendering", r"^env_core/render"),
    ("engine: call bookkeeping", r"^env_core/(episode|tools|rewards|sessions|errors)"),
    ("engine: other", r"^env_core/"),
    ("door (sqlenv_mcp, doors)", r"^(sqlenv_mcp|doors)/"),
    ("floor's own code (benchmarks)", r"^(benchmarks/|bench_|mcp_floor|profile_doors)"),
    ("MCP SDK", r"^mcp/"),
    ("OpenEnv", r"^openenv/"),
    ("JSON Schema", r"^(jsonschema|referencing|rpds)/"),
    ("pydantic", r"^pydantic"),
    ("HTTP, WebSocket", r"^(uvicorn|h11|httptools|starlette|fastapi|websockets|sse_starlette)/"),
    ("event loop", r"^(asyncio|anyio|selectors|sniffio)/"),
    ("json", r"^json/"),
]


def group_of(path: str) -> str:
    for name, pattern in GROUPS:
        if re.search(pattern, path):
            return name
    return "other (stdlib, ...)"


Profile = tuple[collections.Counter, collections.Counter, int]  # groups, functions, calls
OUR_CODE = r"(env_core|sqlenv_mcp|doors)/|bench_|mcp_floor"
FRAMEWORK = r"(mcp|openenv|starlette|fastapi|uvicorn|h11|httptools|websockets|sse_starlette)/"
FRAME = re.compile(r"^(?P<function>.*) \((?P<path>[^()]*?)(?::\d+)?\)$")


def read_samples(path: Path) -> tuple[collections.Counter, collections.Counter]:
    """Samples by group and by function, from py-spy's raw output (one stack per line).

    A sample is charged to the innermost frame of our code (the engine, the door, the floor's
    own code) when only libraries run below it (asyncio for the SQL worker hop, pydantic for an
    observation), and otherwise to the package of its innermost frame: our code that passes a
    request on to a framework (main, a middleware) is not charged for the framework's work.
    """
    groups: collections.Counter = collections.Counter()
    functions: collections.Counter = collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        # With --subprocesses a stack starts with its processes' command lines (which may
        # hold ";" themselves), then the Python frames.
        frames = [
            match
            for frame in stack.split(";")
            if (match := FRAME.match(frame)) and not frame.startswith("process ")
        ]
        if not frames:
            continue  # no Python frame: the process is starting or ending
        charged = frames[-1]["path"]
        for frame in reversed(frames):
            if re.match(FRAMEWORK, frame["path"]):
                break  # our code above it only passed the call on (main, a middleware)
            if re.match(OUR_CODE, frame["path"]):
                charged = frame["path"]
                break
        if "sandbox_worker" in stack:
            charged = "WORKER " + charged
        groups[group_of(charged)] += int(count)
        functions[f"{frames[-1]['function']} ({frames[-1]['path']})"] += int(count)
    return groups, functions


@contextmanager
def sampling(pid: int, calls: int, children: bool = True) -> Iterator[list]:
    """py-spy recording `pid` (and its child processes) while the block runs; the list it
    yields holds the block's `Profile` once the block has ended."""
    profiles: list[Profile] = []
    with tempfile.TemporaryDirectory() as scratch:
        output = Path(scratch) / "samples.txt"
        command = [str(PY_SPY), "record", "--gil", "--function", "--rate", str(RATE)]
        command += ["--format", "raw", "--output", str(output), "--pid", str(pid)]
        spy = subprocess.Popen(
            [*command, "--subprocesses"] if children else command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.5)  # py-spy attaches
        try:
            yield profiles
        finally:
            spy.send_signal(signal.SIGINT)
            _, errors = spy.communicate(timeout=60)
        if not output.exists():
            raise RuntimeError(f"py-spy recorded nothing: {errors.strip()[-500:]}")
        profiles.append((*read_samples(output), calls))


def profile(pid: int, calls: int, make_calls: Callable[[], None]) -> Profile:
    with sampling(pid, calls) as profiles:
        make_calls()
    return profiles[0]


def server_args(args: argparse.Namespace) -> list[str]:
    return ["--data-dir", str(args.data_dir), "--split", SPLIT, "--max-steps", "1000"]


def rounds_of(calls: int) -> Iterator[tuple[int, str, dict]]:
    for number in range(calls):
        tool = list(CALLS)[number % len(CALLS)]
        yield number, tool, CALLS[tool]


def mcp_calls(kind: str, calls: int) -> Iterator[tuple[str, dict]]:
    """An MCP door's calls: on ours the rounds, in an episode started again within its step
    budget; on the floor as many `noop` calls."""
    for number, tool, arguments in rounds_of(calls):
        if kind == "floor":
            yield "noop", {}
            continue
        if number % 900 == 0:
            yield "start_episode", {"question_id": QUESTION}
        yield tool, arguments


# --- doors ----------------------------------------------------------------------------------


def engine_loop(args: argparse.Namespace) -> None:
    """Run in a child process under py-spy: the calls in process, ours or bare sqlite3."""
    from bench_engine import bare_call, bare_connection

    from env_core.catalog import Catalog
    from env_core.manager import EpisodeManager
    from env_core.settings import Settings

    catalog = Catalog.load(args.data_dir, [SPLIT])
    if args.engine_loop == "floor":
        path = catalog.database_path("concert_singer")
        connection = bare_connection(path)
        call = functools.partial(bare_call, connection)
    else:
        manager = EpisodeManager(catalog, Settings(split=SPLIT, max_steps=1000))
        episode = manager.create(question_id=QUESTION)
        call = episode.call
    for _number, tool, arguments in rounds_of(len(CALLS)):
        call(tool, arguments)  # the SQL workers start before the sampling does
    print("ready", flush=True)
    sys.stdin.readline()  # py-spy has attached
    for number, tool, arguments in rounds_of(args.calls):
        if args.engine_loop == "ours" and number % 900 == 899:
            manager.close(episode.episode_id)
            episode = manager.create(question_id=QUESTION)
            call = episode.call
        call(tool, arguments)
    print("done", flush=True)
    sys.stdin.readline()  # py-spy has stopped


def profile_engine(args: argparse.Namespace) -> dict[str, Profile]:
    profiles = {}
    for kind in ("floor", "ours"):
        command = [sys.executable, __file__, "--data-dir", str(args.data_dir)]
        command += ["--calls", str(args.calls * ENGINE_CALLS), "--engine-loop", kind]
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        child.stdout.readline()

        def run(child: subprocess.Popen = child) -> None:
            child.stdin.write("go\n")
            child.stdin.flush()
            child.stdout.readline()

        profiles[kind] = profile(child.pid, args.calls * ENGINE_CALLS, run)
        child.communicate("exit\n")
    return profiles


def profile_mcp_http(args: argparse.Namespace) -> dict[str, Profile]:
    profiles = {}
    for kind in ("floor", "ours"):
        program = [str(FLOOR_SERVER)] if kind == "floor" else ["-m", "sqlenv_mcp"]
        command = [sys.executable, *program, "--transport", "http", *server_args(args)]
        with bench_openenv.running(command, "/health") as server:
            session = Session(f"{server.url}/mcp", Tally(), 120)

            async def calls(session: Session = session, kind: str = kind) -> None:
                await session.open()
                for tool, arguments in mcp_calls(kind, args.calls):
                    await session.call(tool, arguments)
                await session.close()

            profiles[kind] = profile(server.pid, args.calls, lambda c=calls: asyncio.run(c()))
    return profiles


def profile_mcp_stdio(args: argparse.Namespace) -> dict[str, Profile]:
    """The server (found by the pid it writes before it becomes the server), then the client."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def measured(kind: str, side: str, pid_file: Path) -> Profile:
        become = (
            "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); "
            "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
        )
        parameters = StdioServerParameters(
            command=sys.executable,
            args=["-c", become, str(pid_file), str(FLOOR_SERVER), *server_args(args)],
            env={**os.environ, "PYTHONPATH": str(BENCHMARKS.parent)},
        )
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            pid = int(pid_file.read_text()) if side == "server" else os.getpid()
            with sampling(pid, args.calls, children=side == "server") as profiles:
                for tool, arguments in mcp_calls(kind, args.calls):
                    await session.call_tool(tool, arguments)
            return profiles[0]

    profiles = {}
    with tempfile.TemporaryDirectory() as scratch:
        for kind in ("floor", "ours"):
            for side in ("server", "client"):
                pid_file = Path(scratch) / f"{kind}-{side}.pid"
                profiles[f"{kind} {side}"] = asyncio.run(measured(kind, side, pid_file))
    return profiles


def profile_openenv(args: argparse.Namespace) -> dict[str, Profile]:
    profiles = {}
    for kind in ("floor", "ours"):
        if kind == "floor":
            command = bench_openenv.floor(4)
        else:
            command = bench_openenv.ours(
                argparse.Namespace(data_dir=str(args.data_dir), split=SPLIT), 4, 1000
            )
        with bench_openenv.running(command) as server:

            async def calls(url: str = server.url, kind: str = kind) -> None:
                async with bench_openenv.client(url) as env:
                    for number, tool, arguments in rounds_of(args.calls):
                        if number % 900 == 0:
                            await env.reset(**({"question_id": QUESTION} if kind == "ours" else {}))
                        await env.call(tool, **arguments)

            profiles[kind] = profile(server.pid, args.calls, lambda c=calls: asyncio.run(c()))
    return profiles


DOORS = {
    "engine": profile_engine,
    "mcp-stdio": profile_mcp_stdio,
    "mcp-http": profile_mcp_http,
    "openenv": profile_openenv,
}


def report(door: str, profiles: dict[str, Profile], top: int) -> None:
    def per_call(samples: int, calls: int) -> float:
        return samples / RATE / calls * 1e6

    calls = next(iter(profiles.values()))[2]
    print(f"\n{door}: {calls} calls each, CPU µs per call (sampled)")
    names = list(profiles)
    print(f"{'':32}" + "".join(f"{name:>14}" for name in names))
    used = [name for name, _ in GROUPS] + ["other (stdlib, ...)"]
    for group in used:
        if any(profiles[name][0][group] for name in names):
            row = "".join(
                f"{per_call(profiles[name][0][group], profiles[name][2]):>14.0f}" for name in names
            )
            print(f"{group:<32}{row}")
    totals = "".join(
        f"{per_call(sum(profiles[name][0].values()), profiles[name][2]):>14.0f}" for name in names
    )
    print(f"{'total':<32}{totals}")
    for name in names:
        if name.startswith("floor"):
            continue
        _, functions, calls = profiles[name]
        print(f"  {name}: top functions by own time (µs per call)")
        for function, samples in functions.most_common(top):
            print(f"    {per_call(samples, calls):>7.1f}  {function[:100]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--door", choices=list(DOORS), action="append", help="default: all")
    parser.add_argument("--calls", type=int, default=3000, help="per server")
    parser.add_argument("--top", type=int, default=8, help="functions shown per profile")
    parser.add_argument("--engine-loop", choices=["ours", "floor"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine_loop:
        engine_loop(args)
        return
    if not PY_SPY.exists():
        raise SystemExit(f"py-spy is not installed beside {sys.executable}: pip install py-spy")
    print(f"calls in turn: {', '.join(CALLS)}; py-spy at {RATE} samples/s, GIL held only")
    for door in args.door or list(DOORS):
        report(door, DOORS[door](args), args.top)


if __name__ == "__main__":
    main()
