"""Who a client is, as the servers see it, each a real process on 127.0.0.1: its own address,
whatever it says about itself; `X-Forwarded-For` only from the proxies the operator names
(`--trusted-proxies`); and at most `--max-sockets-per-client` TCP connections from one address,
on the MCP, OpenEnv and A2A servers alike (serving/http_protocol.py).

A second client is a second loopback address: a socket bound to 127.0.0.2 before it connects.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from served_episodes import MCP_HEADERS, MCP_INITIALIZE
from websockets.sync.client import connect as connect_websocket

from serving.local_server import LocalServer

SOCKETS = 4
MCP = (["sqlenv_mcp", "--transport", "http"], "/health")
OPENENV = (["doors.commands"], "/health")
A2A = (["env_core.cli", "purple", "--policy", "random"], "/.well-known/agent-card.json")


@contextlib.contextmanager
def serving(kind: tuple[list[str], str], *args: str) -> Iterator[LocalServer]:
    module, health = kind
    server = LocalServer([sys.executable, "-m", *module, *args], health)
    try:
        yield server
    finally:
        server.stop()


def connected(url: str, source: str = "127.0.0.1") -> socket.socket:
    """A TCP connection to the server at url, made from the loopback address `source`."""
    host, port = url.removeprefix("http://").split(":")
    connection = socket.socket()
    connection.bind((source, 0))
    connection.connect((host, int(port)))
    connection.settimeout(10)
    return connection


def answer(connection: socket.socket, path: str) -> bytes:
    """The server's whole answer to a GET of `path` on the connection."""
    host = f"127.0.0.1:{connection.getpeername()[1]}"
    request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    connection.sendall(request.encode())
    chunks = []
    while chunk := connection.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def eventually(attempt: Callable[[], list[bytes]], within_s: float = 10.0) -> list[bytes]:
    """The answers `attempt` gets once the server has seen earlier connections close (it
    notices a close when its event loop gets to it): tried again while one of them is 429."""
    deadline = time.monotonic() + within_s
    while True:
        answers = attempt()
        refused = any(answer.startswith(b"HTTP/1.1 429 ") for answer in answers)
        if not refused or time.monotonic() > deadline:
            return answers
        time.sleep(0.05)


def spoofing(address: str) -> dict[str, str]:
    return {"X-Forwarded-For": address}


def test_an_mcp_client_naming_others_in_x_forwarded_for_is_still_itself(cache_dir):
    with serving(MCP, "--max-sessions-per-client", "2") as server:
        statuses = [
            httpx.post(
                f"{server.url}/mcp",
                json=MCP_INITIALIZE,
                headers={**MCP_HEADERS, **spoofing(f"10.0.0.{n}")},
            ).status_code
            for n in range(1, 4)
        ]
    assert statuses == [200, 200, 429]


def test_an_openenv_client_naming_others_in_x_forwarded_for_is_still_itself(cache_dir):
    with serving(OPENENV, "--max-sessions-per-client", "2") as server:
        url = f"{server.url.replace('http', 'ws')}/ws"
        with contextlib.ExitStack() as held:
            for n in (1, 2, 3):
                last = held.enter_context(
                    connect_websocket(url, additional_headers=spoofing(f"10.0.0.{n}"))
                )
            refusal = json.loads(last.recv(timeout=10))
    assert refusal["data"]["code"] == "CAPACITY_REACHED"


@pytest.mark.parametrize("kind", [MCP, OPENENV, A2A], ids=["mcp", "openenv", "a2a"])
def test_one_address_holds_a_bounded_number_of_sockets_and_others_connect(kind, cache_dir):
    health = kind[1]
    with serving(kind, "--max-sockets-per-client", str(SOCKETS)) as server:
        held = [connected(server.url) for _ in range(SOCKETS)]
        refused = answer(connected(server.url), health)
        elsewhere = answer(connected(server.url, "127.0.0.2"), health)
        held.pop().close()
        [after_one_closed] = eventually(lambda: [answer(connected(server.url), health)])
        for connection in held:
            connection.close()
    head, _, text = refused.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 429 ")
    assert text == (
        b"this client has 4 connections open to this server, as many as one client may: "
        b"close one first"
    )
    assert elsewhere.startswith(b"HTTP/1.1 200 ")
    assert after_one_closed.startswith(b"HTTP/1.1 200 ")


def test_an_open_websocket_counts_until_it_closes(cache_dir):
    with serving(OPENENV, "--max-sockets-per-client", "2") as server:
        first, second = websocket(server.url), websocket(server.url)
        third = websocket(server.url)
        heads = [head_of(connection) for connection in (first, second, third)]
        for connection in (first, second, third):
            connection.close()

        def two_more() -> list[bytes]:
            pair = [websocket(server.url) for _ in range(2)]
            answers = [head_of(connection) for connection in pair]
            for connection in pair:
                connection.close()
            return answers

        again = eventually(two_more)
    assert [head.split(b" ")[1] for head in heads] == [b"101", b"101", b"429"]
    assert [head.split(b" ")[1] for head in again] == [b"101", b"101"]


def websocket(url: str) -> socket.socket:
    """A connection that has asked the OpenEnv server to open a WebSocket at /ws (and stays
    open, whatever the answer, until closed)."""
    connection = connected(url)
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{connection.getpeername()[1]}\r\n"
        f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n"
    )
    connection.sendall(request.encode())
    return connection


def head_of(connection: socket.socket) -> bytes:
    """The head of the server's answer on the connection: its status line and headers."""
    received = b""
    while b"\r\n\r\n" not in received and (chunk := connection.recv(4096)):
        received += chunk
    return received.partition(b"\r\n\r\n")[0]


def test_a_trusted_proxys_connections_are_not_capped(cache_dir):
    trusting = ("--trusted-proxies", "127.0.0.3")
    with serving(MCP, "--max-sockets-per-client", "2", *trusting) as server:
        through_proxy = [connected(server.url, "127.0.0.3") for _ in range(5)]
        answers = [answer(connection, "/health") for connection in through_proxy]
    assert all(answer.startswith(b"HTTP/1.1 200 ") for answer in answers)
