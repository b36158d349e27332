"""Shared capacity through the MCP and OpenEnv servers, each a real process on 127.0.0.1: one
client cannot take every connection or episode slot, idle connections that hold nothing are
ended, bodies and messages are bounded, malformed input gets a clear error and the server and
the other clients go on.

Requests name another client with `X-Forwarded-For`: the servers here trust it from 127.0.0.1,
standing for a proxy (`--trusted-proxies`; tests/attacks/test_client_identity.py tests that
they trust it from no one else).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import websockets
from process_memory import MIB, PeakRSS, tree_rss
from sdk_client import http_session
from served_episodes import MCP_HEADERS, MCP_INITIALIZE, mcp_reply
from websockets.sync.client import connect as connect_websocket

from env_core.settings import Settings
from serving.http_protocol import REQUEST_S
from serving.json_limits import TOO_MANY
from serving.local_server import LocalServer
from sqlenv_mcp.guard import ID_RUNNING, REPLACEABLE_AFTER_S
from sqlenv_mcp.sdk import MAJOR

pytestmark = pytest.mark.anyio
CAP = 3
IDLE_S = 1.0
# ~0.3 s in a SQL worker.
SLOW_SQL = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 800000) "
    "SELECT count(*) FROM c"
)
QUERY_STEP = {"type": "call_tool", "tool_name": "query", "arguments": {"sql": "SELECT 1"}}
FAIR_USE = ["--max-sessions-per-client", str(CAP), "--idle-session-timeout", str(IDLE_S)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def serve(module: list[str], health: str, *args: str) -> LocalServer:
    trusting = ["--trusted-proxies", "127.0.0.1"]
    return LocalServer([sys.executable, "-m", *module, *trusting, *args], health)


@pytest.fixture
def mcp_server(cache_dir):
    server = serve(["sqlenv_mcp", "--transport", "http"], "/health", *FAIR_USE)
    yield server
    server.stop()


@pytest.fixture
def openenv_server(cache_dir):
    server = serve(["doors.commands"], "/health", *FAIR_USE)
    yield server
    server.stop()


def other_client(address: str) -> dict[str, str]:
    return {"X-Forwarded-For": address}


# --- MCP over HTTP ----------------------------------------------------------------------------


class RawConnection:
    """An MCP connection made by hand, as a careless client makes it: never ended."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        self.url = f"{url}/mcp"
        self.headers = {**MCP_HEADERS, **(headers or {})}
        self.opened = httpx.post(self.url, json=MCP_INITIALIZE, headers=self.headers)
        self.session_id = self.opened.headers.get("mcp-session-id")

    @property
    def session_headers(self) -> dict[str, str]:
        """The headers of a request on this connection once it is open."""
        session = {"mcp-session-id": self.session_id or "", "mcp-protocol-version": "2025-06-18"}
        return {**self.headers, **session}

    def call(self, tool: str, arguments: dict, request_id: int = 2) -> httpx.Response:
        headers = self.session_headers
        if tool == "start_episode":
            notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            httpx.post(self.url, json=notice, headers=headers)
        request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
        request["params"] = {"name": tool, "arguments": arguments}
        # json.dumps escapes what UTF-8 cannot carry (a lone surrogate) as JSON allows.
        return httpx.post(self.url, content=json.dumps(request), headers=headers)


def tool_result(response: httpx.Response) -> dict:
    """The result of a tools/call."""
    return mcp_reply(response.text)["result"]


def test_one_client_holds_a_few_mcp_connections_and_others_still_connect(mcp_server):
    held = [RawConnection(mcp_server.url) for _ in range(CAP)]
    assert all(connection.opened.status_code == 200 for connection in held)
    refused = RawConnection(mcp_server.url)
    assert refused.opened.status_code == 429
    message = refused.opened.json()["error"]["message"]
    assert message.startswith(f"this client has {CAP} MCP sessions open")
    assert RawConnection(mcp_server.url, other_client("10.0.0.2")).opened.status_code == 200


def test_an_ipv6_client_is_its_64_network(mcp_server):
    # One host is commonly given a whole /64: each of its addresses is not another client.
    held = [
        RawConnection(mcp_server.url, other_client(f"2001:db8:0:7::{host:x}"))
        for host in range(1, CAP + 2)
    ]
    assert [connection.opened.status_code for connection in held] == [200] * CAP + [429]
    beside = RawConnection(mcp_server.url, other_client("2001:db8:0:8::1"))
    assert beside.opened.status_code == 200


def test_idle_mcp_connections_without_an_episode_end_and_free_their_place(mcp_server):
    playing, *idle = [RawConnection(mcp_server.url) for _ in range(CAP)]
    assert playing.call("start_episode", {"seed": 1}).status_code == 200
    time.sleep(IDLE_S + 1.5)
    assert all(
        connection.call("query", {"sql": "SELECT 1"}).status_code == 404 for connection in idle
    )
    still = playing.call("query", {"sql": "SELECT 1"})
    assert still.status_code == 200 and not tool_result(still)["isError"]
    assert RawConnection(mcp_server.url).opened.status_code == 200
    assert mcp_server_health(mcp_server)["episodes"]["active"] == 1


def test_a_client_that_never_ends_its_mcp_connections_is_not_locked_out(cache_dir):
    """At its cap, a client's new connection replaces its least recently used one that holds
    no episode and has idled REPLACEABLE_AFTER_S; before, it was refused until one expired
    (--idle-session-timeout, 120 s)."""
    server = serve(["sqlenv_mcp", "--transport", "http"], "/health", FAIR_USE[0], str(CAP))
    try:
        held = [RawConnection(server.url) for _ in range(CAP)]
        assert RawConnection(server.url).opened.status_code == 429  # none idle long enough
        time.sleep(REPLACEABLE_AFTER_S + 0.5)
        held[1].call("query", {"sql": "SELECT 1"})  # now the least recently used is held[0]
        newest = RawConnection(server.url)
        assert newest.opened.status_code == 200
        assert held[0].call("query", {"sql": "SELECT 1"}).status_code == 404
        playing = [*held[1:], newest]
        for connection in playing:
            assert not tool_result(connection.call("start_episode", {"seed": 1}))["isError"]
        time.sleep(REPLACEABLE_AFTER_S + 0.5)
        assert RawConnection(server.url).opened.status_code == 429  # each holds an episode
        assert all(
            connection.call("query", {"sql": "SELECT 1"}).status_code == 200
            for connection in playing
        )
    finally:
        server.stop()


def test_an_mcp_session_id_is_honoured_only_from_its_client(mcp_server):
    """Another client holding a connection's session id gets what an id never made gets (the
    SDK's 404); before, it acted on the connection's episode."""
    owner = RawConnection(mcp_server.url)
    assert not tool_result(owner.call("start_episode", {"seed": 1}))["isError"]
    end = {"jsonrpc": "2.0", "id": 3, "method": "tools/call"}
    end["params"] = {"name": "end_episode", "arguments": {}}
    elsewhere = {**owner.session_headers, **other_client("10.0.0.9")}
    stolen = httpx.post(owner.url, json=end, headers=elsewhere)
    never_made = httpx.post(owner.url, json=end, headers={**elsewhere, "mcp-session-id": "0" * 32})
    assert (stolen.status_code, stolen.content) == (never_made.status_code, never_made.content)
    assert stolen.status_code == 404
    assert httpx.delete(owner.url, headers=elsewhere).status_code == 404
    still = owner.call("query", {"sql": "SELECT 1"})
    assert still.status_code == 200 and not tool_result(still)["isError"]


def mcp_server_health(server: LocalServer) -> dict:
    return httpx.get(f"{server.url}/health").json()


def test_thousands_of_mcp_connections_never_ended_stay_bounded(cache_dir):
    # Before the cap, 10,000 of these grew the server by ~600 MB and locked new clients out.
    server = serve(["sqlenv_mcp", "--transport", "http"], "/health")  # the default limits
    cap = Settings.max_sessions_per_client
    try:
        with httpx.Client() as http, PeakRSS(server.process.pid) as peak:
            statuses = [
                http.post(f"{server.url}/mcp", json=MCP_INITIALIZE, headers=MCP_HEADERS).status_code
                for _ in range(2_000)
            ]
        # The first `cap` are opened; later ones replace the least recently used idle one.
        assert statuses[:cap] == [200] * cap and set(statuses) <= {200, 429}
        assert peak.growth_mib < 40, f"grew {peak.growth_mib:.0f} MiB"
        assert RawConnection(server.url, other_client("10.0.0.3")).opened.status_code == 200
    finally:
        server.stop()


async def test_one_mcp_connection_cannot_take_every_episode_slot(cache_dir):
    server = serve(["sqlenv_mcp", "--transport", "http"], "/health", "--max-episodes", "16")
    try:
        async with http_session(f"{server.url}/mcp") as (session, _):
            for seed in range(40):
                assert not (await session.call_tool("start_episode", {"seed": seed})).isError
            assert mcp_server_health(server)["episodes"]["active"] == 1
            kept = [
                await session.call_tool("start_episode", {"seed": 1, "keep_previous": True})
                for _ in range(20)
            ]
            assert sum(not result.isError for result in kept) == 7  # 8 with the first
            assert mcp_server_health(server)["episodes"]["active"] == 8
        assert mcp_server_health(server)["episodes"]["active"] == 0
    finally:
        server.stop()


def test_mcp_episodes_are_capped_per_client(cache_dir):
    server = serve(
        ["sqlenv_mcp", "--transport", "http"], "/health", "--max-episodes-per-client", "2"
    )
    try:
        starts = [
            tool_result(RawConnection(server.url).call("start_episode", {"seed": 1}))
            for _ in range(3)
        ]
        assert [start["isError"] for start in starts] == [False, False, True]
        refusal = starts[-1]["content"][0]["text"]
        assert "you have 2 episodes open, as many as one client may" in refusal
        elsewhere = RawConnection(server.url, other_client("10.0.0.4"))
        assert not tool_result(elsewhere.call("start_episode", {"seed": 1}))["isError"]
    finally:
        server.stop()


def test_mcp_health_details_need_the_token_and_an_allowed_host(cache_dir):
    server = serve(["sqlenv_mcp", "--transport", "http"], "/health", "--auth-token", "s3cret")
    try:
        assert httpx.get(f"{server.url}/health").json() == {"status": "healthy"}
        token = {"Authorization": "Bearer s3cret"}
        assert "episodes" in httpx.get(f"{server.url}/health", headers=token).json()
        evil = {**token, "Host": "evil.example"}
        assert httpx.get(f"{server.url}/health", headers=evil).status_code == 421
    finally:
        server.stop()


def test_an_mcp_call_with_a_lone_surrogate_is_a_clear_error(mcp_server):
    connection = RawConnection(mcp_server.url)
    connection.call("start_episode", {"seed": 1})
    response = connection.call("query", {"sql": "SELECT '\ud800'"})
    if MAJOR >= 2:
        # mcp 2.x reads JSON strictly: the message is refused whole, and nothing is spent.
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == -32700 and error["message"].startswith("Parse error: ")
        after = tool_result(connection.call("query", {"sql": "SELECT 1"}))
        assert after["content"][0]["text"].endswith("[14 steps left]")
        return
    reply = tool_result(response)
    assert reply["isError"] and reply["structuredContent"]["reward"] < 0
    assert reply["content"][0]["text"].startswith(
        "Error: query: sql is not valid Unicode text (it holds a lone surrogate)"
    )


# --- OpenEnv ----------------------------------------------------------------------------------


def test_request_bodies_are_limited_before_they_are_read(openenv_server):
    url = f"{openenv_server.url}/reset"
    declared = httpx.post(url, content=b"{" + b" " * (2 << 20) + b"}")
    assert declared.status_code == 413 and "over the limit" in declared.json()["detail"]

    def chunks():
        for _ in range(100):
            yield b" " * (1 << 20)  # 100 MB with no declared length

    with PeakRSS(openenv_server.process.pid) as peak:
        streamed = httpx.post(url, content=chunks())
    assert streamed.status_code == 413
    assert peak.growth_mib < 20, f"grew {peak.growth_mib:.0f} MiB"


def test_hostile_values_are_echoed_short(openenv_server):
    long_id = httpx.post(f"{openenv_server.url}/reset", json={"question_id": "x" * 900_000})
    assert long_id.status_code == 200 and len(long_id.content) < 1_000
    assert "question_id must be a short string" in long_id.json()["observation"]["text"]
    bad_seed = httpx.post(f"{openenv_server.url}/reset", json={"seed": "y" * 900_000})
    assert bad_seed.status_code == 422 and len(bad_seed.content) < 1_000
    listed = httpx.post(f"{openenv_server.url}/reset", json={"episode_id": ["a", "b"]})
    assert listed.status_code == 422 and "valid string" in listed.text


async def test_malformed_websocket_frames_get_an_error_and_the_session_goes_on(openenv_server):
    async with websockets.connect(f"{openenv_server.url.replace('http', 'ws')}/ws") as socket:
        for frame in ("[1, 2]", "null", "42", b"\x00binary"):
            await socket.send(frame)
            reply = json.loads(await socket.recv())
            assert reply["type"] == "error" and reply["data"]["code"] == "INVALID_JSON"
        await socket.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        assert json.loads(await socket.recv())["data"]["observation"]["text"].startswith(
            "Question: "
        )


async def test_one_client_holds_a_few_websockets_and_others_still_connect(openenv_server):
    url = f"{openenv_server.url.replace('http', 'ws')}/ws"
    held = [await websockets.connect(url) for _ in range(CAP)]
    try:
        async with websockets.connect(url) as refused:
            reply = json.loads(await refused.recv())
        assert reply["data"]["code"] == "CAPACITY_REACHED"
        assert f"this client has {CAP} sessions open" in reply["data"]["message"]
        async with websockets.connect(url, additional_headers=other_client("10.0.0.5")) as other:
            await other.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            assert json.loads(await other.recv())["type"] == "observation"
    finally:
        for socket in held:
            await socket.close()


def test_sessions_created_over_http_cannot_hold_capacity(openenv_server):
    create = {"jsonrpc": "2.0", "id": 7, "method": "openenv/session/create", "params": {}}
    replies = [httpx.post(f"{openenv_server.url}/mcp", json=create).json() for _ in range(CAP + 1)]
    assert all("session_id" in reply["result"] for reply in replies[:CAP])
    assert replies[-1]["id"] == 7
    assert f"this client has {CAP} sessions open" in replies[-1]["error"]["message"]
    time.sleep(IDLE_S + 1.5)  # none attached a WebSocket: closed
    closed = {"jsonrpc": "2.0", "id": 8, "method": "tools/list"}
    closed["params"] = {"session_id": replies[0]["result"]["session_id"]}
    assert "Unknown session_id" in httpx.post(f"{openenv_server.url}/mcp", json=closed).text
    assert "session_id" in httpx.post(f"{openenv_server.url}/mcp", json=create).json()["result"]


NEVER_MADE = "00000000-0000-4000-8000-000000000000"


def test_an_openenv_session_id_is_honoured_only_from_its_client(openenv_server):
    """Another client holding a session's id gets what an id never made gets, over HTTP and
    WebSocket; before, it could use, attach to or close the session."""
    url = f"{openenv_server.url}/mcp"
    create = {"jsonrpc": "2.0", "id": 7, "method": "openenv/session/create", "params": {}}
    owner = other_client("10.0.0.7")
    session_id = httpx.post(url, json=create, headers=owner).json()["result"]["session_id"]

    def ask(method: str, which: str, headers: dict[str, str] | None = None) -> str:
        request = {"jsonrpc": "2.0", "id": 8, "method": method, "params": {"session_id": which}}
        return httpx.post(url, json=request, headers=headers).text.replace(which, "ID")

    def attach(which: str) -> str:
        socket_url = f"{openenv_server.url.replace('http', 'ws')}/ws?session_id={which}"
        with connect_websocket(socket_url) as socket:
            return socket.recv(timeout=10).replace(which, "ID")

    for method in ("tools/list", "openenv/session/close"):
        assert ask(method, session_id) == ask(method, NEVER_MADE)
        assert "Unknown session_id: ID" in ask(method, session_id)
    assert attach(session_id) == attach(NEVER_MADE)
    assert "tools" in ask("tools/list", session_id, owner)
    assert '"closed":true' in ask("openenv/session/close", session_id, owner).replace(" ", "")


def test_the_web_seed_must_be_a_plain_whole_number():
    from doors.openenv.web import MAX_SEED_DIGITS, seed_option

    assert seed_option(" 7 ") == {"seed": 7} and seed_option("") == {}
    for typed in ("²", "1e3", "-1", "9" * (MAX_SEED_DIGITS + 1)):
        with pytest.raises(ValueError, match="whole number"):
            seed_option(typed)


# --- servers started for evaluation -----------------------------------------------------------


def test_a_server_started_for_an_evaluation_stops_when_the_evaluation_is_killed(cache_dir):
    script = (
        "import sys, time\n"
        "from serving.local_server import LocalServer\n"
        "server = LocalServer([sys.executable, '-m', 'sqlenv_mcp', '--transport', 'http'],"
        " '/health')\n"
        "print(server.process.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    evaluation = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    server_pid = int(evaluation.stdout.readline())
    evaluation.send_signal(signal.SIGKILL)
    evaluation.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _running(server_pid):
        time.sleep(0.1)
    assert not _running(server_pid), "the server outlived the evaluation that started it"


def test_a_server_started_for_an_evaluation_holds_its_port_while_it_starts(monkeypatch):
    """The port is bound before the server process starts, and the socket handed over: in the
    seconds the server spends starting, nothing else can take the port (a port only looked up
    free could become another connection's own, and the server then failed to listen)."""
    taken = []
    start = subprocess.Popen

    def start_then_take_the_port(command: list[str], **options) -> subprocess.Popen:
        process = start(command, **options)
        port = int(command[command.index("--port") + 1])
        with socket.socket() as other, contextlib.suppress(OSError):
            other.bind(("127.0.0.1", port))
            taken.append(port)
        return process

    monkeypatch.setattr(subprocess, "Popen", start_then_take_the_port)
    server = LocalServer([sys.executable, "-m", "sqlenv_mcp", "--transport", "http"], "/health")
    try:
        assert taken == []
        assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200
    finally:
        server.stop()


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def read_until_closed(connection: socket.socket) -> bytes:
    connection.settimeout(REQUEST_S + 10)
    chunks = []
    while chunk := connection.recv(65_536):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("door", ["mcp", "openenv"])
def test_a_request_that_does_not_arrive_whole_is_answered_408_and_its_socket_closed(door, request):
    """uvicorn waited for a request for as long as its client took: one that sent part of a
    request and stopped held its socket, a file descriptor, for good (1,010 such sockets left
    the server unable to accept another). A WebSocket is not timed once open."""
    server = request.getfixturevalue(f"{door}_server")
    head = b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % (b"/mcp" if door == "mcp" else b"/step")
    parts = [b"", head, head + b'content-length: 100\r\n\r\n{"a"']  # nothing, a head, a body
    with contextlib.ExitStack() as stack:
        websocket = None
        if door == "openenv":
            url = f"{server.url.replace('http', 'ws')}/ws"
            websocket = stack.enter_context(connect_websocket(url))
            websocket.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            websocket.recv()
        started = time.monotonic()
        connections = [
            stack.enter_context(socket.create_connection(("127.0.0.1", server.port))) for _ in parts
        ]
        for connection, part in zip(connections, parts, strict=True):
            connection.sendall(part)
        replies = [read_until_closed(connection) for connection in connections]
        waited = time.monotonic() - started
        if websocket is not None:
            websocket.send(json.dumps({"type": "step", "data": QUERY_STEP}))
            stepped = json.loads(websocket.recv())["data"]["observation"]["result"]
            assert stepped["structured_content"]["ok"]
    assert [reply.split(b"\r\n", 1)[0] for reply in replies] == [
        b"HTTP/1.1 408 Request Timeout"
    ] * 3
    assert replies[0].endswith(b"the request did not arrive whole within 10 s")
    assert REQUEST_S - 0.5 < waited < REQUEST_S + 5
    if door == "mcp":
        reply = httpx.post(f"{server.url}/mcp", json=MCP_INITIALIZE, headers=MCP_HEADERS)
        assert reply.status_code == 200


# What each of these bodies costs the server unguarded: a 500 and a traceback in its log (the
# first three), or 340,000 dicts kept parsed while the connection idles (~25 MiB).
UNREADABLE_BODIES = {
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sample","arguments":'
    b'{"table":"t","n":' + b"9" * 4_301 + b"}}}": "a number may have at most 4300 digits",
    b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":'
    + b"[" * 100_000
    + b"]" * 100_000
    + b"}": "a message may nest arrays and objects at most 32 deep",
    b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"\xff"}}': (
        "a message must be UTF-8 text"
    ),
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"describe","arguments":'
    b'{"table":[' + b"{}," * 340_000 + b"{}]}}}": (
        "a message may hold at most 10,000 values (array items and object members)"
    ),
}


def test_an_mcp_body_the_sdk_cannot_read_or_would_hold_large_gets_a_parse_error(mcp_server):
    connection = RawConnection(mcp_server.url)
    for body, message in UNREADABLE_BODIES.items():
        reply = httpx.post(connection.url, content=body, headers=connection.session_headers)
        assert (reply.status_code, reply.json()["error"]) == (
            400,
            {"code": -32700, "message": message},
        )
    assert connection.call("start_episode", {}).status_code == 200
    assert "Traceback" not in mcp_server.output()


async def test_a_websocket_frame_of_too_many_values_is_an_error_and_held_by_no_socket(
    openenv_server,
):
    step = '{"type":"step","data":{"type":"call_tool","tool_name":"describe","arguments":%s}}'
    frame = step.replace("%s", '{"table":[' + "{}," * 340_000 + "{}]}")
    url = f"{openenv_server.url.replace('http', 'ws')}/ws"
    before = tree_rss(openenv_server.process.pid)
    async with contextlib.AsyncExitStack() as stack:
        sockets = [await stack.enter_async_context(websockets.connect(url)) for _ in range(CAP)]
        for socket_ in sockets:
            await socket_.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            await socket_.recv()
            await socket_.send(frame)
            reply = json.loads(await socket_.recv())
            assert reply["data"] == {"message": TOO_MANY, "code": "INVALID_JSON"}
        held = tree_rss(openenv_server.process.pid) - before
        await sockets[0].send(json.dumps({"type": "step", "data": QUERY_STEP}))
        stepped = json.loads(await sockets[0].recv())["data"]["observation"]["result"]
    assert stepped["structured_content"]["ok"]
    assert held < 40 * MIB, held / MIB  # each socket held ~25 MiB unguarded


def test_an_mcp_request_reusing_the_id_of_one_still_running_is_refused_and_both_are_answered(
    mcp_server,
):
    """The SDK answers by id: the second request took the first's answer (an error about a
    table it never named) and the first was left without one."""
    connection = RawConnection(mcp_server.url)
    connection.call("start_episode", {})
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(connection.call, "query", {"sql": SLOW_SQL}, 7)
        time.sleep(0.1)
        second = connection.call("describe", {"table": "books"}, 7)
        first = slow.result(30)
    assert second.status_code == 400 and second.json()["error"]["message"] == ID_RUNNING
    assert mcp_reply(first.text)["result"]["structuredContent"]["tool"] == "query"
    again = mcp_reply(connection.call("describe", {"table": "books"}, 7).text)
    assert "books" in again["result"]["content"][0]["text"]
