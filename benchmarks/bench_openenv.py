"""OpenEnv door: WebSocket step latency against the framework floor, and a concurrency sweep.

The floor is a no-op environment served by the same `create_app`, with the same concurrency and
WebSocket settings and the same observation shapes: what OpenEnv itself costs per step
(WebSocket frame, JSON, pydantic validation and serialisation). Both servers run as uvicorn
subprocesses on 127.0.0.1 and one client process drives them, so client and server share the
machine's cores.

1. Latency: one typed client per server, the same calls interleaved (describe, sample, query
   on Spider's concert_singer), p50/p99 per tool and over all three, and the ratio ours /
   floor; "query new" is the same query with new text each call, which ours compiles and
   runs every time, in process as its program is bounded (a repeated one is answered with the
   result ours kept).
   Two more floors: "replay" is the same no-op answering each call with the observation ours
   sends for it (made once, in process, at start-up): what OpenEnv costs to carry our
   observations. "sql" is replay that first runs the call's bare SQLite statements (none for
   an answer) on the database of the question ours would start for the same reset, with one
   reused connection per database, as bench_engine's floor does: what a minimal SQL
   environment must do, so that ours / sql is what the engine and the door add to running
   the SQL at all.
   "floor 2" is a second copy of the no-op: its ratio to the first is how far two identical
   servers differ in the same run, against which to read the others. This client runs on one
   CPU and every server on another (`split_cpus`), and each round calls the servers in a new
   order, so that neither where a server runs nor which server's call comes before its own
   favours one server over another.
2. Sweep: N sessions at once (64, 256, 1024), each connecting, resetting, then (when all have
   reset) making 10 steps, the last an answer. Success rate, p99 step latency, and the
   server's RSS growth per open session, measured while all N sessions hold an episode. Each
   N runs on every server in turn `--repeats` times (a fresh server each time): the worst
   success rate and the median of every other figure are shown, as one run's ratios move by
   a third on a shared machine. "replay" is the no-op answering with our observations, as in
   the latency table (an answer, too): what OpenEnv itself makes of our observations under
   the same load; "sql" is it running each call's bare statements first, on the tables of
   the question ours starts for the same seed. "ours again" is the same N sessions run once
   more on the same server, as the rollouts of one batch of questions are: every statement
   was asked before, so each is given its kept result and none goes to the sandbox.

    python benchmarks/bench_openenv.py --data-dir ../shared/data/spider
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shutil
import sqlite3
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from bench_engine import bare_call, bare_connection

from doors.openenv.client import SQLEnvClient
from env_core.catalog import Catalog
from env_core.schemas import SCHEMAS
from env_core.settings import Settings
from serving.asgi import listening_socket
from serving.local_server import LocalServer
from serving.parent_watch import stop_with_parent

QUESTION = "dev_without_wta_1:1"  # concert_singer: names, countries and ages of singers
LATENCY_CALLS = {
    "describe": {"table": "singer"},
    "sample": {"table": "singer", "n": 5},
    "query": {"sql": "SELECT name, country, age FROM singer ORDER BY age DESC"},
}
EPISODE_STEPS = 10
MAX_STEPS = 1000  # the largest budget the server allows
# The same query with new text each round (a comment that counts): ours compiles and runs every
# one (in process: its program is bounded, see `env_core.programs`), where a repeated statement
# is answered with its kept result (see `env_core.reuse.KeptResults`). "all" is over
# LATENCY_CALLS, without it.
NEW_QUERY = "query new"
# A second copy of the no-op in the latency table: its ratio to the first is the run's noise.
TWIN = "floor 2"
# The sweep run once more on the same server of ours: every statement is asked again.
AGAIN = "ours again"
ROUNDS_PER_EPISODE = MAX_STEPS // (len(LATENCY_CALLS) + 1)


def latency_calls(round_: int) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each latency row's call in a round: (tool, arguments)."""
    calls = {tool: (tool, arguments) for tool, arguments in LATENCY_CALLS.items()}
    new_sql = f"{LATENCY_CALLS['query']['sql']} -- round {round_}"
    return {**calls, NEW_QUERY: ("query", {"sql": new_sql})}


def our_observations(catalog: Catalog, split: str) -> dict[str, dict[str, Any]]:
    """The fields of the observation ours answers each latency call with, made in process."""
    from openenv.core.env_server.mcp_types import CallToolAction

    from doors.openenv.environment import SQLExploreEnvironment
    from env_core.manager import EpisodeManager
    from env_core.settings import Settings

    manager = EpisodeManager(catalog, Settings(split=split, max_steps=MAX_STEPS))
    environment = SQLExploreEnvironment(manager)
    environment.reset(question_id=QUESTION)
    observations = {}
    for tool, arguments in {**LATENCY_CALLS, "answer": {"value": "0"}}.items():
        observation = environment.step(CallToolAction(tool_name=tool, arguments=arguments))
        observations[tool] = {
            name: getattr(observation, name) for name in type(observation).model_fields
        }
    manager.shutdown()
    return observations


class BareDatabases:
    """The sql floor's databases: for a reset, the question ours would start (chosen by
    `EpisodeManager.choose_question` itself), its tables in ours's order, and one connection
    per database, opened on first use and reused, as ours shares one."""

    def __init__(self, catalog: Catalog, split: str) -> None:
        from env_core.manager import EpisodeManager
        from env_core.settings import Settings

        self.catalog = catalog
        # Only for its choice of question: no episode is opened, nor any SQL worker started.
        self.chooser = EpisodeManager(catalog, Settings(split=split))
        self.opened: dict[Path, tuple[sqlite3.Connection, list[str]]] = {}

    def start(
        self, seed: int | None, question_id: str | None
    ) -> tuple[sqlite3.Connection, list[str]]:
        question = self.chooser.choose_question(seed=seed, question_id=question_id)
        path = self.catalog.database_path(question.db_id)
        if path not in self.opened:
            tables = SCHEMAS.get(path, immutable=True, timeout_s=Settings.query_timeout_s)
            self.opened[path] = bare_connection(path), list(tables)
        return self.opened[path]


def serve_floor(
    port: int,
    max_sessions: int,
    replayed: dict[str, dict] | None = None,
    databases: BareDatabases | None = None,
) -> None:
    """Serve the no-op environment (run in a subprocess of this script); with `replayed`, it
    answers each tool with that observation, after running the call's bare statements (none
    for an answer) on the database of the question reset chose if `databases` are given."""
    import uvicorn
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
    from openenv.core.env_server.types import ConcurrencyConfig

    from doors.openenv.models import EpisodeObservation, SQLState
    from doors.openenv.server import WEBSOCKET_OPTIONS

    class NoopEnvironment(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True
        REQUIRES_SINGLE_THREAD_EXECUTOR = True
        connection = None

        def reset(
            self, seed=None, episode_id=None, question_id=None, **options: Any
        ) -> EpisodeObservation:
            tables = ["t"]
            if databases is not None:
                self.connection, tables = databases.start(seed, question_id)
            return EpisodeObservation(text="noop", episode_id="noop", tables=tables, budget=15)

        def step(self, action, timeout_s=None, **kwargs: Any) -> CallToolObservation:
            if self.connection is not None and action.tool_name != "answer":
                bare_call(self.connection, action.tool_name, action.arguments)
            if replayed is not None:
                return CallToolObservation(**replayed[action.tool_name])
            structured = {"episode_id": "noop", "tool": action.tool_name, "ok": True}
            result = {
                "content": [{"type": "text", "text": "ok"}],
                "structured_content": {**structured, "reward": 0.0, "done": False, "data": {}},
                "is_error": False,
            }
            done = action.tool_name == "answer"
            return CallToolObservation(
                tool_name=action.tool_name, result=result, reward=0.0, done=done
            )

        async def reset_async(self, seed=None, episode_id=None, **options: Any):
            return self.reset(seed, episode_id, **options)

        async def step_async(self, action, timeout_s=None, **kwargs: Any):
            return self.step(action)

        @property
        def state(self) -> SQLState:
            return SQLState()

    app = create_app(
        NoopEnvironment,
        CallToolAction,
        CallToolObservation,
        env_name="noop",
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_sessions, session_timeout=900.0
        ),
        state_cls=SQLState,
    )
    listener = listening_socket("127.0.0.1", port)
    stop_with_parent()
    config = uvicorn.Config(app, log_level="warning", **WEBSOCKET_OPTIONS)
    uvicorn.Server(config).run(sockets=[listener])


@dataclass(frozen=True)
class Server:
    url: str
    pid: int

    def rss(self) -> int:
        return psutil.Process(self.pid).memory_info().rss


@contextmanager
def running(command: list[str], health: str = "/health") -> Iterator[Server]:
    """The server `command` starts on a port this process binds for it (see `LocalServer`)."""
    server = LocalServer(command, health)
    try:
        yield Server(server.url, server.process.pid)
    finally:
        server.stop()


def ours(args: argparse.Namespace, sessions: int, max_steps: int = 15) -> list[str]:
    return [
        *(sys.executable, "-m", "doors.commands", "--data-dir", args.data_dir),
        *("--split", args.split, "--max-episodes", str(sessions)),
        # One client (this one) runs every session.
        *("--max-sessions-per-client", str(sessions)),
        *("--max-sockets-per-client", str(2 * sessions + 16)),
        *("--max-episodes-per-client", str(sessions)),
        *("--max-steps", str(max_steps)),
    ]


def floor(sessions: int) -> list[str]:
    return [sys.executable, __file__, "--serve-floor", "--max-sessions", str(sessions)]


def replay(args: argparse.Namespace, sessions: int = 4, *, sql: bool = False) -> list[str]:
    options = ["--replay", *(["--sql"] if sql else [])]
    return [*floor(sessions), *options, "--data-dir", args.data_dir, "--split", args.split]


def percentile(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1]


def client(url: str) -> SQLEnvClient:
    return SQLEnvClient(base_url=url, connect_timeout_s=120, message_timeout_s=120)


async def measure_latency(urls: dict[str, str], rounds: int) -> dict[str, list[float]]:
    """`urls`: the servers by name ("ours" and the floors), called in turn."""
    timings: dict[str, list[float]] = defaultdict(list)
    async with contextlib.AsyncExitStack() as stack:
        envs = {name: await stack.enter_async_context(client(url)) for name, url in urls.items()}
        for name, env in envs.items():
            if name != "ours":
                await env.reset(question_id=QUESTION)
        for round_ in range(rounds):
            if round_ % ROUNDS_PER_EPISODE == 0:
                await envs["ours"].reset(question_id=QUESTION)
            # A new order each round: a call's time depends on what ran just before it (the
            # server called first in a fixed order was ~14% quicker than its twin, and the one
            # always called after ours's sandbox runs ~15% slower).
            order = random.Random(round_).sample([*envs.items()], len(envs))
            for row, (tool, arguments) in latency_calls(round_).items():
                for name, env in order:
                    started = time.perf_counter()
                    result = await env.call(tool, **arguments)
                    timings[f"{name} {row}"].append((time.perf_counter() - started) * 1000)
                    if not result.observation.ok:
                        raise RuntimeError(f"{name} {tool} failed: {result.observation.text}")
    return timings


@dataclass(frozen=True)
class SweepResult:
    success_rate: float
    p50_ms: float
    p99_ms: float
    rss_kib_per_session: float
    steps_per_s: float

    @classmethod
    def typical(cls, runs: list[SweepResult]) -> SweepResult:
        """The worst success rate of `runs` and the median of each other figure."""
        return cls(
            min(run.success_rate for run in runs),
            *(
                statistics.median(getattr(run, name) for run in runs)
                for name in ("p50_ms", "p99_ms", "rss_kib_per_session", "steps_per_s")
            ),
        )


async def sweep(
    server: Server, sessions: int, after_reset: Callable[[], object] = lambda: None
) -> SweepResult:
    """`after_reset` runs once every session holds an episode, before their steps."""
    baseline = server.rss()
    all_reset = asyncio.Event()
    ready = 0
    step_ms: list[float] = []

    async def episode(seed: int) -> bool:
        nonlocal ready
        async with client(server.url) as env:
            start = await env.reset(seed=seed)
            tables = start.observation.data["tables"]
            ready += 1
            if ready == sessions:
                all_reset.set()
            await all_reset.wait()
            for step in range(EPISODE_STEPS):
                table = tables[step % len(tables)]
                tool, arguments = [
                    ("describe", {"table": table}),
                    ("sample", {"table": table, "n": 3}),
                    ("query", {"sql": f'SELECT count(*) FROM "{table}"'}),
                ][step % 3]
                if step == EPISODE_STEPS - 1:
                    tool, arguments = "answer", {"value": "0"}
                started = time.perf_counter()
                result = await env.call(tool, **arguments)
                step_ms.append((time.perf_counter() - started) * 1000)
            return result.done

    async def measured(seed: int) -> bool:
        try:
            return await episode(seed)
        except Exception:  # a refused or dropped session counts as a failure
            return False

    tasks = [asyncio.create_task(measured(seed)) for seed in range(sessions)]
    await asyncio.wait_for(all_reset.wait(), timeout=300)
    held = server.rss()
    after_reset()
    started = time.perf_counter()
    outcomes = await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    return SweepResult(
        success_rate=sum(outcomes) / sessions,
        p50_ms=percentile(step_ms, 50),
        p99_ms=percentile(step_ms, 99),
        rss_kib_per_session=(held - baseline) / sessions / 1024,
        steps_per_s=len(step_ms) / elapsed,
    )


@dataclass(frozen=True)
class CPUs:
    client: int
    servers: int


def split_cpus() -> CPUs | None:
    """One CPU for this client and another for every server of the latency table, or None
    without two to pin to. Left to the scheduler, two copies of the same no-op differed by up
    to a third at the median, by where each happened to run; pinned, by 2% at most."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) < 2 or shutil.which("taskset") is None:
        return None
    return CPUs(client=cpus[0], servers=cpus[1])


@contextmanager
def client_on(cpus: CPUs | None) -> Iterator[None]:
    """This process on the client's CPU while the block runs (anywhere it may be, after)."""
    if cpus is None:
        yield
        return
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpus.client})
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def print_latency(
    timings: dict[str, list[float]], servers: list[str], rounds: int, cpus: CPUs | None
) -> None:
    tools = [*LATENCY_CALLS, NEW_QUERY, "all"]
    figures = {}  # (server, tool): (p50, p99)
    for tool in tools:
        calls = list(LATENCY_CALLS) if tool == "all" else [tool]
        for name in servers:
            samples = [x for call in calls for x in timings[f"{name} {call}"]]
            figures[name, tool] = (percentile(samples, 50), percentile(samples, 99))
    floors = [name for name in servers if name != "ours"]
    where = (
        f"this client on CPU {cpus.client}, the servers on CPU {cpus.servers}"
        if cpus
        else "where the scheduler puts them"
    )
    print(f"WebSocket step latency, ms ({rounds} calls each, interleaved; {where}), p50 and p99:")
    print_pairs(servers, {tool: [figures[name, tool] for name in servers] for tool in tools}, 3)
    print("\nours / each floor (floor: a no-op; replay: it answering with our observations;")
    print("sql: replay running the call's bare SQLite statements first), p50 and p99:")

    def ratio(server: str, floor: str, tool: str) -> tuple[float, float]:
        over, under = figures[server, tool], figures[floor, tool]
        return over[0] / under[0], over[1] / under[1]

    ratios = {tool: [ratio("ours", name, tool) for name in floors] for tool in tools}
    print_pairs(floors, ratios, 2, unit="x")
    print(f"\n{TWIN} / floor: the same no-op in another process, what two identical servers")
    print("differ by in this run, p50 and p99:")
    print_pairs(["floor"], {tool: [ratio(TWIN, "floor", tool)] for tool in tools}, 2, unit="x")


def print_pairs(
    names: list[str], rows: dict[str, list[tuple[float, float]]], decimals: int, unit: str = ""
) -> None:
    """A table of (p50, p99) pairs: one row per tool, two columns per name."""
    p50_width, p99_width = 12 - len(unit), 8 - len(unit)
    print(f"{'tool':<10}" + "".join(f"{name + ' p50':>12}{'p99':>8}" for name in names))
    for tool, pairs in rows.items():
        cells = (
            f"{p50:>{p50_width}.{decimals}f}{unit}{p99:>{p99_width}.{decimals}f}{unit}"
            for p50, p99 in pairs
        )
        print(f"{tool:<10}" + "".join(cells))


def positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return number


def session_counts(text: str) -> list[int]:
    return [positive(n) for n in text.split(",") if n.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data/spider")
    parser.add_argument("--split", default="dev_without_wta_1")
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument(
        "--sweep",
        type=session_counts,
        default="64,256,1024",
        help="session counts, comma-separated (64,256,1024); empty: latency only",
    )
    parser.add_argument(
        "--repeats", type=positive, default=3, help="sweep runs per N and server (default: 3)"
    )
    parser.add_argument("--serve-floor", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--max-sessions", type=int, default=64, help=argparse.SUPPRESS)
    parser.add_argument("--replay", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sql", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_floor:
        replayed = databases = None
        if args.replay:
            catalog = Catalog.load(Path(args.data_dir), [args.split])
            replayed = our_observations(catalog, args.split)
            if args.sql:
                databases = BareDatabases(catalog, args.split)
        serve_floor(args.port, args.max_sessions, replayed, databases)
        return

    commands = {
        "floor": floor(4),
        TWIN: floor(4),
        "replay": replay(args),
        "sql": replay(args, sql=True),
        "ours": ours(args, 4, MAX_STEPS),
    }
    cpus = split_cpus()
    pin = ["taskset", "-c", str(cpus.servers)] if cpus else []
    with contextlib.ExitStack() as stack:
        urls = {
            name: stack.enter_context(running([*pin, *command])).url
            for name, command in commands.items()
        }
        with client_on(cpus):
            timings = asyncio.run(measure_latency(urls, args.rounds))
    print_latency(timings, list(commands), args.rounds, cpus)

    if not args.sweep:
        return
    print(
        f"\nConcurrency sweep: N sessions, each reset + {EPISODE_STEPS} steps; "
        f"median of {args.repeats} runs (success: the worst)"
    )
    header = f"{'N':>6}  {'server':<20}{'success':>9}{'p50 ms':>9}{'p99 ms':>9}"
    print(header + f"{'KiB/sess':>10}{'steps/s':>9}")
    knee = None
    for sessions in args.sweep:
        servers = {
            "floor": floor(sessions),
            "replay": replay(args, sessions),
            "sql": replay(args, sessions, sql=True),
            "ours": ours(args, sessions),
        }
        runs: dict[str, list[SweepResult]] = defaultdict(list)
        for _ in range(args.repeats):
            for name, command in servers.items():
                with running(command) as server:
                    runs[name].append(asyncio.run(sweep(server, sessions)))
                    if name == "ours":
                        runs[AGAIN].append(asyncio.run(sweep(server, sessions)))
        results = {name: SweepResult.typical(runs[name]) for name in runs}
        for name, r in results.items():
            print(
                f"{sessions:>6}  {name:<20}{r.success_rate:>9.1%}{r.p50_ms:>9.1f}"
                f"{r.p99_ms:>9.1f}{r.rss_kib_per_session:>10.0f}{r.steps_per_s:>9.0f}"
            )
        for floor_name in ("floor", "replay", "sql"):
            f = results[floor_name]
            for name in ("ours", AGAIN):
                o = results[name]
                print(
                    f"{sessions:>6}  {f'{name} / {floor_name}':<20}{'':>9}"
                    f"{o.p50_ms / f.p50_ms:>8.2f}x{o.p99_ms / f.p99_ms:>8.2f}x"
                    f"{o.rss_kib_per_session / f.rss_kib_per_session:>9.2f}x"
                    f"{o.steps_per_s / f.steps_per_s:>8.2f}x"
                )
        o = results["ours"]
        if knee is None and (o.p99_ms > 1000 or o.success_rate < 0.999):
            knee = sessions
    print(f"knee of ours (p99 > 1 s or success < 99.9%): {knee or 'not reached'}")


if __name__ == "__main__":
    main()
