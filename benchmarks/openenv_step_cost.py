"""OpenEnv door: what a step costs the server, ours against the floors, and where it goes.

Four servers answer the same calls (describe, sample and query on Spider's concert_singer, as
bench_openenv's latency table), in turn, in blocks of 300 calls:

- floor: the no-op environment on the same `create_app` (bench_openenv);
- replay: the no-op answering each call with the observation ours sends for it;
- ours replaying: our server, with its catalog, episode manager and sandbox, whose environment
  answers each call with that same observation and runs no engine code;
- ours.

For each: the median wall time per call, and the server's and this client's CPU time per call
(their processes' CPU time over the blocks). "ours" less "ours replaying" is what the engine's
step costs the server in place: between two of its calls the client and the other servers
run on the same cores, so its code and data are no longer in the CPU's caches. The same calls
made in a loop in this process, where they stay cached, give the step's cost without that.

    python benchmarks/openenv_step_cost.py --data-dir ../shared/data/spider
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
from bench_openenv import (
    LATENCY_CALLS,
    MAX_STEPS,
    QUESTION,
    client,
    floor,
    our_observations,
    ours,
    replay,
    running,
)

from env_core.catalog import Catalog

BLOCK_CALLS = 300
OURS = ("ours replaying", "ours")


def serve_ours_replaying(argv: list[str], data_dir: str, split: str) -> int:
    """Our server whose environment answers every call with our observation for it (run in a
    subprocess of this script)."""
    from openenv.core.env_server.mcp_types import CallToolObservation

    from doors.openenv import server
    from doors.openenv.environment import SQLExploreEnvironment

    replayed = our_observations(Catalog.load(Path(data_dir), [split]), split)

    async def replaying(self, action, timeout_s=None, **kwargs) -> CallToolObservation:
        return CallToolObservation(**replayed[action.tool_name])

    SQLExploreEnvironment.step_async = replaying
    return server.main(argv)


async def measure(servers: dict[str, tuple[str, int]], blocks: int) -> dict[str, dict]:
    """Per server: wall times of its calls, and its and this process's CPU seconds."""
    figures = {name: {"wall": [], "server": 0.0, "client": 0.0} for name in servers}
    async with contextlib.AsyncExitStack() as stack:
        envs = {
            name: await stack.enter_async_context(client(url)) for name, (url, _) in servers.items()
        }
        for _ in range(blocks):
            for name, env in envs.items():
                await (env.reset(question_id=QUESTION) if name in OURS else env.reset())
                process = psutil.Process(servers[name][1])
                server_before, client_before = _cpu(process), time.process_time()
                for _ in range(BLOCK_CALLS // len(LATENCY_CALLS)):
                    for tool, arguments in LATENCY_CALLS.items():
                        started = time.perf_counter()
                        await env.call(tool, **arguments)
                        figures[name]["wall"].append(time.perf_counter() - started)
                figures[name]["server"] += _cpu(process) - server_before
                figures[name]["client"] += time.process_time() - client_before
    return figures


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def in_a_loop(catalog: Catalog, split: str, calls: int = 3000) -> tuple[float, float]:
    """µs per call in this process: ours's step, and building the observation it returns."""
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation

    from doors.openenv.environment import SQLExploreEnvironment
    from env_core.manager import EpisodeManager
    from env_core.settings import Settings

    manager = EpisodeManager(catalog, Settings(split=split, max_steps=MAX_STEPS))
    environment = SQLExploreEnvironment(manager)
    actions = [CallToolAction(tool_name=t, arguments=a) for t, a in LATENCY_CALLS.items()]
    fields = our_observations(catalog, split)
    rounds = calls // len(actions)

    def microseconds(call: Callable[[CallToolAction], object]) -> float:
        """The median over 7 runs of `call` made on every action `rounds` times, each run in
        a new episode (a run spends the budget)."""
        runs = []
        for _ in range(7):
            environment.reset(question_id=QUESTION)
            started = time.perf_counter()
            for _ in range(rounds):
                for action in actions:
                    call(action)
            runs.append((time.perf_counter() - started) / (rounds * len(actions)) * 1e6)
        return statistics.median(runs)

    step = microseconds(environment.step)
    observation = microseconds(lambda action: CallToolObservation(**fields[action.tool_name]))
    manager.shutdown()
    return step, observation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data/spider")
    parser.add_argument("--split", default="dev_without_wta_1")
    parser.add_argument("--blocks", type=int, default=16, help="blocks of 300 calls per server")
    parser.add_argument("--serve-ours-replaying", action="store_true", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.serve_ours_replaying:
        sys.exit(serve_ours_replaying(rest, args.data_dir, args.split))

    our_server = ours(args, 4, MAX_STEPS)
    commands = {
        "floor": floor(4),
        "replay": replay(args),
        "ours replaying": [
            sys.executable,
            __file__,
            "--serve-ours-replaying",
            *our_server[3:],  # ours's own options, after `python -m module`
        ],
        "ours": our_server,
    }
    with contextlib.ExitStack() as stack:
        servers = {}
        for name, command in commands.items():
            server = stack.enter_context(running(command))
            servers[name] = (server.url, server.pid)
        figures = asyncio.run(measure(servers, args.blocks))

    calls = args.blocks * BLOCK_CALLS
    print(f"{args.blocks} blocks of {BLOCK_CALLS} calls per server, in turn; µs per call")
    print(f"{'server':<16}{'wall p50':>10}{'server CPU':>12}{'client CPU':>12}")
    cpu = {}
    for name, f in figures.items():
        cpu[name] = f["server"] / calls * 1e6
        wall = statistics.median(f["wall"]) * 1e6
        print(f"{name:<16}{wall:>10.0f}{cpu[name]:>12.0f}{f['client'] / calls * 1e6:>12.0f}")
    in_place = cpu["ours"] - cpu["ours replaying"]
    print(f"\nthe engine's step in place (ours less ours replaying): {in_place:.0f} µs of CPU")
    catalog = Catalog.load(Path(args.data_dir), [args.split])
    step, observation = in_a_loop(catalog, args.split)
    looped = step - observation
    print(
        f"the same calls in a loop in this process: {step:.1f} µs a step, "
        f"{observation:.1f} of them building the observation replay sends too: "
        f"{looped:.1f} µs; in place it costs {in_place / looped:.1f}x that"
    )


if __name__ == "__main__":
    main()
