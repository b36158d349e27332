"""Replicas behind HAProxy (deploy/serve_replicas.py with deploy/haproxy.cfg): one URL per
protocol, MCP sessions pinned to their replica, a dead replica taken out, slow clients cut off."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import httpx
import pytest
from websockets.sync.client import connect as connect_websocket

from deploy.serve_replicas import Ports, Replicas
from evals.door_clients import DoorSpec, open_door
from evals.evaluate import evaluate
from evals.play import EpisodeRecord
from evals.policies import OraclePolicy
from evals.policy import EpisodeContext, Play

# Door kind: the replicas' kind
KINDS = {"mcp-http": "mcp", "openenv": "openenv"}
CLIENTS = 4
SLOW_HEADER_LIMIT_S = 5  # `timeout http-request` in deploy/haproxy.cfg


@pytest.fixture(scope="module")
def haproxy() -> None:
    if shutil.which("haproxy") is None:
        pytest.fail("haproxy is missing: scripts/apt-install.sh haproxy haproxy (make test does)")


@pytest.fixture(scope="module")
def replicas(haproxy, dev_door_spec) -> Iterator[Replicas]:
    with Replicas(2, dev_door_spec.settings, Ports.free()) as running:
        yield running


def door_spec(replicas: Replicas, spec: DoorSpec, kind: str) -> DoorSpec:
    url = replicas.mcp_url if kind == "mcp-http" else replicas.openenv_url
    return replace(spec, kind=kind, url=url)


def play_in_threads(spec: DoorSpec, seeds: range, episodes: int, policy) -> list:
    """Each seed is one client (its own door, so its own connection) playing `episodes`;
    returns each client's records, or the exception that ended it."""

    def play(seed: int) -> list[EpisodeRecord] | Exception:
        try:
            door = open_door(spec)
        except Exception as error:
            return error
        try:
            return evaluate(door, policy, episodes, seed=seed).records
        except Exception as error:
            return error
        finally:
            door.close()

    with ThreadPoolExecutor(len(seeds)) as pool:
        return list(pool.map(play, seeds))


def created(replicas: Replicas, kind: str) -> list[int]:
    return [replica.episodes()["created"] for replica in replicas.of_kind(KINDS[kind])]


@pytest.mark.parametrize("kind", KINDS)
def test_oracle_episodes_through_one_url_are_spread_and_correct(replicas, dev_door_spec, kind):
    before = created(replicas, kind)
    outcomes = play_in_threads(
        door_spec(replicas, dev_door_spec, kind), range(CLIENTS), 3, OraclePolicy()
    )
    records = [record for outcome in outcomes for record in outcome]
    assert len(records) == CLIENTS * 3
    assert all(record.correct for record in records)
    spread = [
        after - earlier for after, earlier in zip(created(replicas, kind), before, strict=True)
    ]
    assert sum(spread) == CLIENTS * 3
    assert all(count > 0 for count in spread), spread


MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Mcp-Protocol-Version": "2025-06-18",
}
INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "stickiness", "version": "1"},
}


def open_mcp_session(client: httpx.Client, url: str) -> tuple[str, str]:
    """Initialise an MCP session over plain HTTP; returns its id and the replica serving it."""
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE}
    opened = client.post(f"{url}/mcp", json=body, headers=MCP_HEADERS)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    client.post(f"{url}/mcp", json=notice, headers={**MCP_HEADERS, "Mcp-Session-Id": session})
    return session, opened.headers["x-replica"]


def served_by(client: httpx.Client, url: str, session: str, method: str, params: dict) -> str:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = client.post(
        f"{url}/mcp", json=body, headers={**MCP_HEADERS, "Mcp-Session-Id": session}
    )
    assert answer.status_code == 200, answer.text
    return answer.headers["x-replica"]


def test_mcp_sessions_stay_on_the_replica_that_created_them(replicas):
    calls = [
        ("tools/list", {}),
        ("tools/call", {"name": "start_episode", "arguments": {}}),
        ("tools/call", {"name": "query", "arguments": {"sql": "SELECT 1"}}),
    ]
    with httpx.Client(timeout=30) as client:
        sessions = dict(open_mcp_session(client, replicas.mcp_url) for _ in range(4))
        # New sessions go round the replicas...
        assert sorted(sessions.values()) == ["mcp-1", "mcp-1", "mcp-2", "mcp-2"]
        # ...and every later request of a session reaches the replica that created it.
        for session, home in sessions.items():
            for method, params in calls:
                assert served_by(client, replicas.mcp_url, session, method, params) == home
            client.delete(f"{replicas.mcp_url}/mcp", headers={"Mcp-Session-Id": session})


def trickle_headers(port: int) -> tuple[float, bytes]:
    """Send a request head one header a second; returns when the balancer cuts the connection
    (seconds taken, what it answered)."""
    with socket.create_connection(("127.0.0.1", port)) as connection:
        connection.settimeout(1.0)
        started = time.monotonic()
        connection.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        while time.monotonic() - started < 4 * SLOW_HEADER_LIMIT_S:
            try:
                return time.monotonic() - started, connection.recv(4096)
            except TimeoutError:
                connection.sendall(b"X-Slow: 1\r\n")
    return time.monotonic() - started, b"(still open)"


def test_a_slow_header_client_is_cut_off_and_others_are_served(replicas):
    ports = (replicas.ports.openenv, replicas.ports.mcp)
    with ThreadPoolExecutor(len(ports)) as pool:
        slow = [pool.submit(trickle_headers, port) for port in ports]
        time.sleep(1)
        assert httpx.get(f"{replicas.openenv_url}/health", timeout=5).status_code == 200
        assert httpx.get(f"{replicas.mcp_url}/health", timeout=5).status_code == 200
        for outcome in slow:
            seconds, answer = outcome.result()
            assert answer.startswith(b"HTTP/1.1 408"), answer
            assert seconds < SLOW_HEADER_LIMIT_S + 2


@dataclass
class HeldOracle:
    """The oracle, holding every episode after its start until `go` is set."""

    started: threading.Barrier
    go: threading.Event
    name: str = "oracle"

    def play(self, context: EpisodeContext) -> Play:
        self.started.wait(timeout=120)
        self.go.wait(timeout=120)
        yield from OraclePolicy().play(context)


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


# What a client whose replica died meets at its next call.
LOST_EPISODE = {
    # The door's error, for the HTTP 404 a live replica gives an unknown session or for the
    # connection the balancer's 502 for the dead replica ended.
    "mcp-http": ("ConnectionError: the connection to the MCP",),
    # The OpenEnv client sees its WebSocket drop; or, if it has already reconnected (to a live
    # replica: a new session, which has no episode), the door says the episode was lost; or,
    # reconnecting before the balancer has marked the dead replica down, the balancer's 502.
    "openenv": (
        "ConnectionClosedError",
        "ConnectionError: the connection to the OpenEnv server",
        "server rejected WebSocket connection: HTTP 502",
    ),
}


def lost_episode_error(outcome: list[EpisodeRecord] | Exception) -> str | None:
    if isinstance(outcome, Exception):
        return f"{type(outcome).__name__}: {outcome}"
    (record,) = outcome
    return None if record.correct else record.steps[0].observation


def test_a_killed_replica_fails_only_its_own_clients_clearly(haproxy, dev_door_spec):
    with Replicas(2, dev_door_spec.settings, Ports.free()) as replicas:
        started = threading.Barrier(len(KINDS) * CLIENTS + 1)
        go = threading.Event()
        policy = HeldOracle(started, go)
        with ThreadPoolExecutor(len(KINDS)) as pool:
            running = {
                kind: pool.submit(
                    play_in_threads,
                    door_spec(replicas, dev_door_spec, kind),
                    range(CLIENTS),
                    1,
                    policy,
                )
                for kind in KINDS
            }
            started.wait(timeout=120)  # every client holds an episode on some replica
            victims = {kind: replicas.of_kind(KINDS[kind])[0] for kind in KINDS}
            held = {kind: victim.episodes()["active"] for kind, victim in victims.items()}
            for victim in victims.values():
                victim.server.process.kill()
            go.set()
            outcomes = {kind: future.result() for kind, future in running.items()}

        for kind, victim in victims.items():
            errors = [lost_episode_error(outcome) for outcome in outcomes[kind]]
            failed = [error for error in errors if error is not None]
            assert 0 < held[kind] < CLIENTS
            assert len(failed) == held[kind], errors
            assert all(any(lost in error for lost in LOST_EPISODE[kind]) for error in failed), (
                failed
            )
            assert wait_until(lambda v=victim: replicas.server_states()[v.name] == "DOWN", 10)

        # The balancer sends new clients to the live replicas only.
        for kind in KINDS:
            spec = door_spec(replicas, dev_door_spec, kind)
            outcomes = play_in_threads(spec, range(CLIENTS), 2, OraclePolicy())
            assert all(record.correct for outcome in outcomes for record in outcome), outcomes


def test_a_port_in_use_fails_at_once_before_any_server_starts(haproxy, dev_door_spec):
    """The balancer's sockets are bound first, so a taken port is named before seconds go into
    starting replicas, and a free port stays taken by the balancer from then on (a port merely
    looked up free could meanwhile become a connection's own port)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        replicas = Replicas(1, dev_door_spec.settings, Ports(0, 0, port))
        started = time.monotonic()
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}: address already"):
            replicas.__enter__()
        assert time.monotonic() - started < 1
        assert replicas.replicas == [] and replicas.balancer is None


def test_behind_the_balancer_a_client_is_the_address_it_connects_from(haproxy, dev_door_spec):
    """A client that names others in X-Forwarded-For is still counted as itself; a client
    connecting from another address is another client."""
    one_each = ("--max-sessions-per-client", "2")
    with Replicas(1, dev_door_spec.settings, Ports.free(), one_each) as replicas:
        mcp_statuses = [
            httpx.post(
                f"{replicas.mcp_url}/mcp",
                json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE},
                headers={**MCP_HEADERS, "X-Forwarded-For": f"10.0.0.{n}"},
            ).status_code
            for n in range(1, 4)
        ]
        websocket_url = f"{replicas.openenv_url.replace('http', 'ws')}/ws"
        with contextlib.ExitStack() as held:
            for n in range(1, 4):
                spoofed = {"X-Forwarded-For": f"10.0.0.{n}"}
                last = held.enter_context(
                    connect_websocket(websocket_url, additional_headers=spoofed)
                )
            websocket_refusal = json.loads(last.recv(timeout=10))["data"]["code"]
        from_elsewhere = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"))
        with from_elsewhere:
            elsewhere = from_elsewhere.post(
                f"{replicas.mcp_url}/mcp",
                json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE},
                headers=MCP_HEADERS,
            ).status_code
    assert mcp_statuses == [200, 200, 429]
    assert websocket_refusal == "CAPACITY_REACHED"
    assert elsewhere == 200


def test_a_sessionless_client_plays_across_replicas_by_handle_and_loses_only_a_dead_ones(
    haproxy, dev_door_spec
):
    """Stateless MCP replicas: each call is routed by the handle it carries (the episode's
    replica), a start goes round them; a killed replica's episode is refused by name."""
    question = {"question_id": "dev_without_wta_1:0"}  # How many singers? 6
    with (
        Replicas(
            2, dev_door_spec.settings, Ports.free(), mcp_args=("--stateless",), kinds=("mcp",)
        ) as replicas,
        httpx.Client(timeout=30) as client,
    ):

        def call(tool: str, arguments: dict) -> tuple[dict, str]:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
            body["params"] = {"name": tool, "arguments": arguments}
            reply = client.post(f"{replicas.mcp_url}/mcp", json=body, headers=MCP_HEADERS)
            assert reply.status_code == 200, reply.text
            return reply.json()["result"], reply.headers["x-replica"]

        (a, home_a), (b, home_b) = (call("start_episode", question) for _ in range(2))
        assert {home_a, home_b} == {"mcp-1", "mcp-2"}
        a_id, b_id = a["structuredContent"]["episode_id"], b["structuredContent"]["episode_id"]
        # Not in round-robin order: a call routed by anything but its handle meets the other
        # replica at least once.
        count = {"sql": "SELECT count(*) FROM singer"}
        for handle, home in [(a_id, home_a), (a_id, home_a), (b_id, home_b), (b_id, home_b)] * 2:
            result, replica = call("query", {**count, "episode_id": handle})
            assert not result["isError"] and replica == home, result
        answered, replica = call("answer", {"value": "6", "episode_id": a_id})
        assert replica == home_a
        assert answered["structuredContent"]["data"] == {"correct": True}
        assert answered["structuredContent"]["reward"] >= 1

        victim = next(r for r in replicas.of_kind("mcp") if r.name == home_b)
        victim.server.process.kill()
        lost, replica = call("query", {"sql": "SELECT 1", "episode_id": b_id})
        assert replica == home_a and lost["isError"]
        assert lost["content"][0]["text"].startswith(
            f"Error: no open episode '{b_id}': it was started on another server"
        )
        assert "if that server has stopped, the episode is lost" in lost["content"][0]["text"]
        # An episode on the live replica goes on.
        c, replica = call("start_episode", question)
        c_id = c["structuredContent"]["episode_id"]
        answered, replica = call("answer", {"value": "6", "episode_id": c_id})
        assert replica == home_a
        assert answered["structuredContent"]["data"] == {"correct": True}
