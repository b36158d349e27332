"""The Swarm stack (deploy/swarm/stack.yml): the project's image as replicated OpenEnv and MCP
services behind the balancer image, deployed on a single-node swarm and reached through
127.0.0.1. Episodes for both protocols, 1 -> 3 replicas while clients play, a replica killed
and replaced by Swarm; and OpenEnv's own DockerSwarmProvider running the image.
`make swarm-test` runs this module (with the Kubernetes manifests' checks).

A swarm is initialised when none is active, and left again only then; the stack and every
network it made are removed at the end.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import httpx
import pytest
from adversarial import cte_chain
from docker_host import REPOSITORY, Container, docker_daemon
from openenv.core.containers.runtime.providers import DockerSwarmProvider
from test_image import IMAGE, SPLIT
from test_replicas import open_mcp_session, play_in_threads

from deploy.swarm_stack import SwarmStack, build_balancer, docker
from doors.openenv.client import SQLEnvClient
from env_core.answers import gold_as_json
from evals.door_clients import DoorSpec, open_door
from evals.policies import OraclePolicy

BALANCER = "sqlenv-balancer:test"
PROTOCOLS = {"openenv": "openenv", "mcp-http": "mcp"}  # door kind: service


@pytest.fixture(scope="module")
def stack(tmp_path_factory, spider_dir, say) -> Iterator[SwarmStack]:
    started = time.monotonic()
    with docker_daemon(tmp_path_factory.mktemp("docker") / "dockerd.pid"):
        # Cached layers when tests/deploy/test_image.py built the image in this run.
        docker("build", "--network", "host", "--tag", IMAGE, str(REPOSITORY), timeout_s=1800)
        build_balancer(BALANCER)
        built = time.monotonic()
        with SwarmStack(str(spider_dir), SPLIT, IMAGE, BALANCER) as deployed:
            say(
                f"\nswarm stack {deployed.name}: images ready in {built - started:.0f} s, "
                f"deployed and serving in {time.monotonic() - built:.0f} s"
                f"{' (swarm initialised here)' if deployed.swarm_initialised_here else ''}"
            )
            yield deployed
        networks = docker("network", "ls", "--filter", f"name={deployed.name}_", "--quiet")
        assert not networks, f"networks left behind: {networks}"
        say(f"stack removed with its networks; {time.monotonic() - started:.0f} s in all")


def spec_for(stack: SwarmStack, spec: DoorSpec, kind: str) -> DoorSpec:
    url = stack.mcp_url if kind == "mcp-http" else stack.openenv_url
    return replace(spec, kind=kind, url=url)


@pytest.mark.parametrize("kind", PROTOCOLS)
def test_full_episodes_through_the_stack(stack, dev_door_spec, kind, say):
    outcomes = play_in_threads(spec_for(stack, dev_door_spec, kind), range(2), 2, OraclePolicy())
    records = [record for outcome in outcomes for record in outcome]
    assert len(records) == 4 and all(record.correct for record in records), outcomes
    say(f"{kind}: {len(records)} oracle episodes through 127.0.0.1, all correct")


def play_until(spec: DoorSpec, stop: threading.Event, outcomes: list) -> None:
    """One client playing oracle episodes back to back until `stop`; each outcome recorded."""
    seed = 0
    while not stop.is_set():
        outcomes.extend(play_in_threads(spec, range(seed, seed + 1), 1, OraclePolicy()))
        seed += 1


def test_scaling_to_three_replicas_while_clients_play(stack, dev_door_spec, say):
    stop, outcomes = threading.Event(), []
    clients = [
        threading.Thread(
            target=play_until, args=(spec_for(stack, dev_door_spec, kind), stop, outcomes)
        )
        for kind in PROTOCOLS
        for _ in range(2)
    ]
    for client in clients:
        client.start()
    started = time.monotonic()
    try:
        stack.scale(3)
    finally:
        scaled_s = time.monotonic() - started
        stop.set()
        for client in clients:
            client.join(timeout=120)
    records = [record for outcome in outcomes for record in outcome]
    assert all(isinstance(outcome, list) for outcome in outcomes), outcomes
    assert records and all(record.correct for record in records)
    # New MCP sessions go round all three replicas with no change to the balancer.
    with httpx.Client(timeout=30) as client:
        homes = {open_mcp_session(client, stack.mcp_url)[1] for _ in range(6)}
    assert len(homes) == 3, homes
    say(
        f"scaled 1 -> 3 replicas of each in {scaled_s:.0f} s while 4 clients played "
        f"{len(records)} episodes, all correct; new MCP sessions went to {sorted(homes)}"
    )


def memory_peak_mib(container: str) -> float:
    """The most memory the container's processes have used together (cgroup v1), in MiB."""
    read = "cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes"
    return int(docker("exec", container, "sh", "-c", read)) / 2**20


def test_worst_queries_stop_at_the_workers_caps_inside_each_replicas_limit(stack, say):
    """Four statements that would take gigabytes on each replica at once (its four SQL
    workers): each is stopped (its worker's memory cap, or its deadline on a busy machine),
    and every replica stays within its 1 GiB."""
    if len(stack.containers("mcp")) != 3:
        stack.scale(3)
    containers = stack.containers("mcp")
    with httpx.Client(timeout=60) as client:
        sessions = [open_mcp_session(client, stack.mcp_url)[0] for _ in range(12)]
        for session in sessions:
            assert mcp_call(client, stack.mcp_url, session, "start_episode", {}).status_code == 200

        def heavy(session: str) -> str:
            sql = {"sql": cte_chain(24)}
            return mcp_call(client, stack.mcp_url, session, "query", sql).text

        with ThreadPoolExecutor(len(sessions)) as pool:
            answers = list(pool.map(heavy, sessions))
    stopped = [a for a in answers if "MiB of memory a query" in a or "s time limit" in a]
    assert stopped == answers, [answer[:300] for answer in answers if answer not in stopped]
    by_memory = sum("MiB of memory" in answer for answer in answers)
    peaks = [memory_peak_mib(container) for container in containers]
    assert stack.containers("mcp") == containers  # none was killed or replaced
    assert max(peaks) < 1024, peaks
    say(
        f"12 statements of 2**24 reads, 4 on each MCP replica at once: all stopped, {by_memory} "
        f"at the workers' 64 MiB caps, the rest at their deadline; replicas' memory peaks "
        f"{', '.join(f'{peak:.0f}' for peak in peaks)} MiB of their 1,024"
    )


def mcp_call(client: httpx.Client, url: str, session: str, name: str, arguments: dict):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": name, "arguments": arguments}
    headers = {
        "Accept": "application/json, text/event-stream",
        "Mcp-Session-Id": session,
        "Mcp-Protocol-Version": "2025-06-18",
    }
    return client.post(f"{url}/mcp", json=body, headers=headers)


def killed_slot(stack: SwarmStack, kind: str, before: set[str], kill: Callable[[], None]) -> str:
    """Run `kill`; return the balancer slot of `kind` that went down."""
    kill()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        gone = before - stack.up(kind)
        if gone:
            (slot,) = gone
            return slot
        time.sleep(0.2)
    raise AssertionError(f"no {kind} replica went down")


def test_a_killed_replica_is_replaced_and_only_its_sessions_end(stack, dev_door_spec, say):
    if len(stack.containers("openenv")) != 3:
        stack.scale(3)
    spec = spec_for(stack, dev_door_spec, "openenv")
    doors = [open_door(spec) for _ in range(6)]
    episodes = [door.start(f"{SPLIT}:{index}") for index, door in enumerate(doors)]
    victim = stack.containers("openenv")[0]
    held = stack.episodes(victim, "openenv")["active"]
    assert held >= 1

    with httpx.Client(timeout=30) as client:
        sessions = dict(open_mcp_session(client, stack.mcp_url) for _ in range(6))
        for session in sessions:
            assert mcp_call(client, stack.mcp_url, session, "start_episode", {}).status_code == 200
        mcp_victim = stack.containers("mcp")[0]
        slot = killed_slot(
            stack, "mcp", stack.up("mcp"), lambda: docker("kill", victim, mcp_victim)
        )

        openenv_errors, openenv_ok = [], 0
        for door, episode in zip(doors, episodes, strict=True):
            try:
                door.step(episode.episode_id, "query", {"sql": "SELECT 1"})
                openenv_ok += 1
            except ConnectionError as error:
                openenv_errors.append(str(error))
            finally:
                door.close()
        assert len(openenv_errors) == held and openenv_ok == 6 - held, openenv_errors

        mcp_answers = {
            session: mcp_call(client, stack.mcp_url, session, "query", {"sql": "SELECT 1"})
            for session in sessions
        }
    on_victim = [s for s, home in sessions.items() if home == slot]
    assert on_victim and all(mcp_answers[s].status_code == 404 for s in on_victim)
    others = [s for s in sessions if s not in on_victim]
    assert all(mcp_answers[s].status_code == 200 for s in others)

    replaced_started = time.monotonic()
    stack.wait_until_serving(3)
    replaced_s = time.monotonic() - replaced_started
    assert victim not in stack.containers("openenv")
    say(
        f"killed one OpenEnv and one MCP replica: {held} of 6 OpenEnv sessions were on it and "
        f"ended with {openenv_errors[0]!r}; the other {openenv_ok} went on. MCP: "
        f"{len(on_victim)} of 6 sessions on {slot} got {mcp_answers[on_victim[0]].status_code} "
        f"{mcp_answers[on_victim[0]].text[:120]!r}, the other {len(others)} went on. Swarm "
        f"replaced both; the balancer had 3 of each UP again {replaced_s:.0f} s later"
    )


@pytest.fixture
def provider_network(stack) -> Iterator[str]:
    """An attachable overlay network for the provider's service (removed at the end)."""
    name = f"{stack.name}-provider"
    yield name
    subprocess.run(["docker", "network", "rm", name], capture_output=True, timeout=60)


async def play_gold_episode(url: str, question) -> list[str]:
    async with SQLEnvClient(base_url=url) as env:
        texts = [(await env.reset(question_id=question.id)).observation.text]
        texts.append((await env.query(question.sql)).observation.text)
        answered = await env.answer(gold_as_json(question.gold))
        return [*texts, answered.observation.text]


def test_openenvs_swarm_provider_runs_our_image(stack, provider_network, demo_catalog, say):
    """OpenEnv's DockerSwarmProvider as an OpenEnv user calls it: `docker service create
    --publish PORT:8000` (Swarm's routing mesh), then /health through that port."""
    provider = DockerSwarmProvider(overlay_network=provider_network)
    services_before = set(docker("service", "ls", "--format", "{{.Name}}").split())
    started = time.monotonic()
    url = provider.start_container(IMAGE, replicas=2, memory_limit="1g")
    balancer = None
    try:
        (service,) = set(docker("service", "ls", "--format", "{{.Name}}").split()) - services_before
        label = f"label=com.docker.swarm.service.name={service}"
        # Swarm routes to a replica only once its health check has passed, and the provider
        # waits 30 s: the image checks every few seconds, so the first check is not the 30th.
        interval_ns = docker(
            "image", "inspect", "--format", "{{json .Config.Healthcheck.Interval}}", IMAGE
        )
        assert int(interval_ns) <= 5e9
        while time.monotonic() - started < 120:
            states = docker("ps", "--filter", label, "--format", "{{.Status}}").splitlines()
            if len(states) == 2 and all("(healthy)" in state for state in states):
                break
            time.sleep(0.5)
        healthy_s = time.monotonic() - started
        try:
            provider.wait_for_ready(url, timeout_s=5)
            mesh = "answered"
        except TimeoutError:
            mesh = "did not answer (no routing mesh on this machine)"
        # What the routing mesh gives a cluster user: each connection to a healthy replica,
        # a WebSocket session staying on its own. Here a balancer on the provider's network
        # does that, finding the replicas by DNS, on a loopback port.
        balancer = Container.run(
            BALANCER,
            "--network", provider_network,
            "--env", f"OPENENV_REPLICAS=tasks.{service}",
        )  # fmt: skip
        balancer.wait_until_healthy("/health", timeout_s=30)
        question = demo_catalog.questions()[0]
        texts = asyncio.run(play_gold_episode(balancer.url, question))
        assert texts[-1] == "Correct. The episode is over."
    finally:
        if balancer is not None:
            balancer.stop()
        provider.stop_container()
    say(
        f"DockerSwarmProvider: 2 replicas of {IMAGE} healthy {healthy_s:.0f} s after "
        f"start_container; its published {url} {mesh}; through the replicas' DNS the typed "
        f"client played {question.id}: {texts[-1]!r}"
    )
