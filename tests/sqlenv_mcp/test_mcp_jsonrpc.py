"""Messages that are not the JSON-RPC requests the SDK reads are answered as JSON-RPC says, by
both transports alike: a parse error or an invalid request (id null), an unknown method
(-32601, with the request's id), params the method does not take (-32602, saying what is
wrong), an unknown resource (-32002) or prompt (-32602); an unknown or invalid notification is
not answered. The connection goes on, and the
server's log stays quiet.

Before, stdio answered each with a log notification ("Internal Server Error"), HTTP with
pydantic's errors in full as -32602, both left a request whose id is 1.5 or null unanswered
(taken for a notification), invalid params got -32602 without saying what was wrong, and each
of these wrote ~60 lines to the log."""

import contextlib
import json
import select
import subprocess
import sys
import time

import httpx
import pytest
from mcp_processes import RunningServer
from served_episodes import MCP_HEADERS, MCP_INITIALIZE

from sqlenv_mcp.stdio import LINE_TOO_LONG, MAX_LINE_BYTES

REPLY_S = 20
TOOLS_LIST = {"jsonrpc": "2.0", "id": 99, "method": "tools/list"}


def request(request_id: object, method: str = "tools/list", **fields: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, **fields}).encode()


def error(request_id: object, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


NOT_JSON = (
    "a message must be JSON "
    "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
)
ANSWERED = {
    b"{not json": error(None, -32700, NOT_JSON),
    json.dumps([json.loads(request(3))]).encode(): error(
        None,
        -32600,
        "a message must be one JSON-RPC 2.0 object (a batch, an array, is not accepted)",
    ),
    b'{"id": 4, "method": "tools/list"}': error(
        None, -32600, 'a message must have "jsonrpc": "2.0"'
    ),
    request(1.5): error(None, -32600, "a request id must be a string or a whole number"),
    request(None): error(None, -32600, "a request id must be a string or a whole number"),
    request(7, "foo/bar"): error(7, -32601, "unknown method 'foo/bar'"),
    request("x", "tools/call", params=5): error("x", -32602, "params must be an object"),
    request(5, "tools/call", params={}): error(
        5, -32602, "tools/call: params.name: Field required"
    ),
    request(6, "initialize", params={"x": 1}): error(
        6, -32602, "initialize: params.protocolVersion: Field required (and 2 more)"
    ),
    b'{"jsonrpc": "2.0", "id": ' + b"9" * 5_000 + b', "method": "tools/list"}': error(
        None, -32700, "a number may have at most 4300 digits"
    ),
    request(10, "resources/read", params={"uri": "sqlenv://nothing"}): error(
        10, -32002, "unknown resource 'sqlenv://nothing': the resources are sqlenv://databases"
    ),
    request(11, "prompts/get", params={"name": "nothing"}): error(
        11, -32602, "unknown prompt 'nothing': the prompts are solve_question"
    ),
    b'{"jsonrpc": "2.0", "id": 8}': error(
        None,
        -32600,
        "a message without a method must be a response: an id, and a result or an error",
    ),
}
UNANSWERED = (
    b'{"jsonrpc": "2.0", "method": "notifications/unheard_of"}',
    b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"x": 1}}',
)


class StdioServer:
    """`sqlenv-mcp` over stdio, written to and read line by line as raw bytes."""

    def __init__(self, cache_dir) -> None:
        command = [sys.executable, "-m", "sqlenv_mcp", "--cache-dir", str(cache_dir)]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    def send(self, line: bytes) -> None:
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def reply(self) -> dict:
        ready, _, _ = select.select([self.process.stdout], [], [], REPLY_S)
        assert ready, "no reply"
        return json.loads(self.process.stdout.readline())

    def ask(self, line: bytes) -> dict:
        self.send(line)
        return self.reply()

    def stop(self) -> str:
        """Its log (stderr), once it has ended at the end of its input."""
        self.process.stdin.close()
        self.process.wait(timeout=REPLY_S)
        return self.process.stderr.read().decode()


@pytest.fixture
def stdio_server(cache_dir):
    server = StdioServer(cache_dir)
    yield server
    if server.process.poll() is None:
        server.process.kill()
        server.process.wait()


def test_over_stdio_each_message_the_sdk_cannot_take_is_answered_as_json_rpc_says(stdio_server):
    assert "result" in stdio_server.ask(json.dumps(MCP_INITIALIZE).encode())
    stdio_server.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    for line, answer in ANSWERED.items():
        assert stdio_server.ask(line) == answer
    for line in UNANSWERED:
        stdio_server.send(line)
    stdio_server.send(b"   ")  # a blank line is skipped
    assert stdio_server.ask(json.dumps(TOOLS_LIST).encode())["id"] == 99  # nothing before it
    log = stdio_server.stop()
    assert log == ""


def test_over_stdio_a_line_too_long_is_refused_unread_and_the_next_is_served(stdio_server):
    stdio_server.ask(json.dumps(MCP_INITIALIZE).encode())
    started = time.monotonic()
    stdio_server.send(
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "' + b"a" * MAX_LINE_BYTES
    )
    assert stdio_server.reply() == error(None, -32600, LINE_TOO_LONG)
    assert stdio_server.ask(json.dumps(TOOLS_LIST).encode())["id"] == 99
    assert time.monotonic() - started < REPLY_S
    assert stdio_server.stop() == ""


def test_over_stdio_a_client_that_stops_reading_stops_the_server_quietly(stdio_server):
    """The SDK's transport ended with a traceback (a broken pipe) in the host's log."""
    process = stdio_server.process
    process.stdout.close()
    with contextlib.suppress(BrokenPipeError):  # the server has stopped
        for _ in range(1_000):
            stdio_server.send(request(7, "foo/bar"))
    assert process.wait(timeout=REPLY_S) == 0
    assert process.stderr.read() == b""


def test_over_http_each_message_the_sdk_cannot_take_is_answered_as_json_rpc_says(cache_dir):
    server = RunningServer([], cache_dir)
    try:
        url = f"{server.url}/mcp"
        opened = httpx.post(url, json=MCP_INITIALIZE, headers=MCP_HEADERS)
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        headers = {**MCP_HEADERS, **session, "mcp-protocol-version": "2025-06-18"}
        for body, answer in ANSWERED.items():
            reply = httpx.post(url, content=body, headers=headers)
            # A request the SDK could answer is answered as a request; the rest are refused.
            assert (reply.status_code, reply.json()) == (
                400 if answer["id"] is None else 200,
                answer,
            )
        for body in UNANSWERED:
            ignored = httpx.post(url, content=body, headers=headers)
            assert (ignored.status_code, ignored.content) == (202, b"")
        listed = httpx.post(url, json=TOOLS_LIST, headers=headers)
        assert listed.json()["result"]["tools"]
        log = server.output()
    finally:
        server.stop()
    assert log.strip().splitlines() == [f"sqlenv-mcp: serving MCP at {server.url}/mcp"]
