"""Load through HAProxy in front of 1, 2 and 4 replicas (deploy/serve_replicas.py), for MCP
streamable HTTP and OpenEnv, then one replica killed in the middle of a run.

Clients talk to the balancer's one URL per protocol, as in a deployment:

- MCP: N of load_mcp.py's lean sessions at once (initialise, start an episode, 9 more calls,
  end), through the frontend that pins each session to its replica;
- OpenEnv: bench_openenv.py's sweep, N typed clients over WebSocket (connect, reset, then 10
  steps once every client holds an episode), balanced per connection.

For each count it prints success, p50/p99 step latency, steps/s and the scaling efficiency
(steps/s per replica over the first count's steps/s per replica: 100% is linear). Then, with 2
replicas, one replica of each kind is killed: MCP halfway through the steps, OpenEnv once every
client holds an episode; the clients it served must fail with an error, all others succeed.
All processes share this machine's cores with the load generator, so expect less than linear
scaling.

With --swarm the replicas are the Swarm stack's containers (deploy/swarm/stack.yml, scaled to
each count, with the images sqlenv:test and sqlenv-balancer:test built beforehand, as
tests/deploy/test_swarm.py builds them), and no replica is killed (the test does that).

    python benchmarks/load_replicas.py --data-dir ../shared/data/spider --sessions 128
    python benchmarks/load_replicas.py --swarm --replicas 1 3
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
from bench_openenv import SweepResult, percentile, sweep
from load_mcp import Session, Tally, play

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from deploy.serve_replicas import Ports, Replicas
from deploy.swarm_stack import SwarmStack, docker
from env_core.settings import Settings

MCP_STEPS = 10  # start_episode + 9 calls, as load_mcp.play makes them


@dataclass(frozen=True)
class Balanced:
    """The balancer's URL, with the memory of the replicas behind it (what `sweep` reads)."""

    url: str
    pids: tuple[int, ...]

    def rss(self) -> int:
        return sum(psutil.Process(pid).memory_info().rss for pid in self.pids)


@contextmanager
def deployment(args: argparse.Namespace, count: int) -> Iterator[Replicas | SwarmStack]:
    if args.swarm:
        limits = {
            "SQLENV_MAX_EPISODES_PER_CLIENT": str(args.sessions),
            "SQLENV_MAX_SESSIONS_PER_CLIENT": str(args.sessions),
        }
        with SwarmStack(args.data_dir, args.split, environment=limits) as stack:
            if count > 1:
                stack.scale(count)
            yield stack
        return
    # All clients come from this machine: lift the per-client limits to the session count.
    settings = Settings(
        data_dir=args.data_dir,
        split=args.split,
        cache_dir=args.cache_dir,
        max_episodes=args.sessions,
        max_episodes_per_client=args.sessions,
    )
    per_client = ["--max-sessions-per-client", str(args.sessions)]
    with Replicas(count, settings, Ports.free(), per_client) as replicas:
        yield replicas


def openenv_server(replicas: Replicas | SwarmStack) -> Balanced:
    if isinstance(replicas, SwarmStack):
        containers = replicas.containers("openenv")
        pids = tuple(
            int(pid) for pid in docker("inspect", "--format", "{{.State.Pid}}", *containers).split()
        )
    else:
        pids = tuple(replica.server.process.pid for replica in replicas.of_kind("openenv"))
    return Balanced(replicas.openenv_url, pids)


class TrackedSession(Session):
    """A lean MCP session that remembers which replica served it (HAProxy's X-Replica)."""

    def __init__(self, url: str, tally: Tally, timeout_s: float) -> None:
        super().__init__(url, tally, timeout_s)
        self.replica: str | None = None

    def note(self, headers: dict[str, str]) -> None:
        super().note(headers)
        self.replica = self.replica or headers.get("x-replica")


async def mcp_load(
    url: str, sessions: int, timeout_s: float, halfway=None
) -> tuple[SweepResult, list[TrackedSession], list[BaseException | None]]:
    """N lean sessions at once; `halfway` (if given) is called when half the steps are made."""
    tally = Tally()
    clients = [TrackedSession(f"{url}/mcp", tally, timeout_s) for _ in range(sessions)]
    started = asyncio.get_running_loop().time()
    tasks = [asyncio.create_task(play(client, seed)) for seed, client in enumerate(clients)]
    if halfway is not None:
        while tally.steps_ok < sessions * MCP_STEPS / 2:
            await asyncio.sleep(0.005)
        halfway()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    elapsed = asyncio.get_running_loop().time() - started
    result = SweepResult(
        success_rate=sum(outcome is None for outcome in outcomes) / sessions,
        p50_ms=percentile(tally.latencies_ms, 50),
        p99_ms=percentile(tally.latencies_ms, 99),
        rss_kib_per_session=float("nan"),
        steps_per_s=tally.steps_ok / elapsed,
    )
    return result, clients, outcomes


def print_row(protocol: str, count: int, result: SweepResult, first: tuple[int, SweepResult]):
    first_count, first_result = first
    per_replica = result.steps_per_s / count
    efficiency = per_replica / (first_result.steps_per_s / first_count)
    print(
        f"{protocol:<9}{count:>9}{result.success_rate:>9.1%}{result.p50_ms:>9.1f}"
        f"{result.p99_ms:>9.1f}{result.steps_per_s:>9.0f}{efficiency:>12.0%}"
    )


def scaling(args: argparse.Namespace) -> None:
    print(f"{args.sessions} sessions at once through the balancer, per protocol")
    print(
        f"{'protocol':<9}{'replicas':>9}{'success':>9}{'p50 ms':>9}{'p99 ms':>9}{'steps/s':>9}"
        f"{'efficiency':>12}"
    )
    first: dict[str, tuple[int, SweepResult]] = {}
    for count in args.replicas:
        with deployment(args, count) as replicas:
            mcp, _, _ = asyncio.run(mcp_load(replicas.mcp_url, args.sessions, args.timeout))
            openenv = asyncio.run(sweep(openenv_server(replicas), args.sessions))
        results = {"mcp-http": mcp, "openenv": openenv}
        for protocol, result in results.items():
            print_row(protocol, count, result, first.setdefault(protocol, (count, result)))


def kill_one_mcp_replica(args: argparse.Namespace, replicas: Replicas) -> None:
    victim = replicas.of_kind("mcp")[0]
    result, clients, outcomes = asyncio.run(
        mcp_load(replicas.mcp_url, args.sessions, args.timeout, victim.server.process.kill)
    )
    tally: Counter[tuple[bool, bool]] = Counter()
    errors = []
    for client, outcome in zip(clients, outcomes, strict=True):
        tally[client.replica == victim.name, outcome is None] += 1
        if outcome is not None:
            errors.append(f"{type(outcome).__name__}: {str(outcome).splitlines()[0]}")
    print(
        f"MCP: killed {victim.name} halfway through the steps. Its sessions: "
        f"{tally[True, False]} failed, {tally[True, True]} had finished before. Other "
        f"sessions: {tally[False, True]} of {tally[False, True] + tally[False, False]} "
        f"succeeded. Overall success {result.success_rate:.1%}."
    )
    for error, times in Counter(errors).most_common(2):
        print(f"    {times} x {error}")


def kill_one_openenv_replica(args: argparse.Namespace, replicas: Replicas) -> None:
    victim = replicas.of_kind("openenv")[0]
    held: list[int] = []

    def kill() -> None:
        held.append(victim.episodes()["active"])
        victim.server.process.kill()

    result = asyncio.run(sweep(openenv_server(replicas), args.sessions, kill))
    failed = round((1 - result.success_rate) * args.sessions)
    print(
        f"OpenEnv: killed {victim.name} once every client held an episode, {held[0]} of the "
        f"{args.sessions} on it: {failed} sessions failed, {args.sessions - failed} succeeded."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data/spider")
    parser.add_argument("--split", default="dev_without_wta_1")
    parser.add_argument("--cache-dir", help="catalog cache shared by the replicas")
    parser.add_argument("--sessions", type=int, default=128, help="sessions at once (128)")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--timeout", type=float, default=120.0, help="per MCP request, seconds")
    parser.add_argument("--swarm", action="store_true", help="through the Swarm stack")
    args = parser.parse_args()
    scaling(args)
    if args.swarm:
        return
    print()
    with deployment(args, 2) as replicas:
        kill_one_mcp_replica(args, replicas)
        kill_one_openenv_replica(args, replicas)


if __name__ == "__main__":
    main()
