"""Hostile and malformed input in the 2026-07-28 protocol (each request carries its protocol
version and client capabilities in `params._meta`; no session) gets the refusals it gets in the
handshake era (tests/sqlenv_mcp/test_mcp_jsonrpc.py), over HTTP and over stdio: the JSON-RPC
screening, the size limits, the request-id rules, the Host/Origin checks and the token."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
from served_episodes import MCP_HEADERS, mcp_reply
from test_mcp_jsonrpc import ANSWERED, REPLY_S, UNANSWERED, StdioServer, error

from sqlenv_mcp.stdio import LINE_TOO_LONG, MAX_LINE_BYTES

CURRENT = "2026-07-28"
# The HTTP status 2026-07-28 gives an error answering a request with an id (else 200).
STATUS = {-32601: 404, -32602: 400}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": CURRENT,
    "io.modelcontextprotocol/clientCapabilities": {},
}
# The request parameter a 2026-07-28 client repeats in a header (Mcp-Name), by method.
NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
SLOW_SQL = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000000) "
    "SELECT count(*) FROM n"
)


def enveloped(body: bytes) -> tuple[bytes, dict[str, str]]:
    """The message with the current protocol's envelope in its params (when it is a request
    whose params can carry one), and the headers a 2026-07-28 client sends with it."""
    headers = {**MCP_HEADERS, "mcp-protocol-version": CURRENT}
    try:
        message = json.loads(body)
    except ValueError:
        return body, headers
    if not (isinstance(message, dict) and isinstance(message.get("method"), str)):
        return body, headers
    params = message.get("params", {})
    if isinstance(params, dict):
        message["params"] = {**params, "_meta": ENVELOPE}
        headers["mcp-method"] = message["method"]
        if message["method"] in NAMED_BY and NAMED_BY[message["method"]] in params:
            headers["mcp-name"] = str(params[NAMED_BY[message["method"]]])
    return json.dumps(message).encode(), headers


def call(url: str, tool: str, arguments: dict, request_id: object = 1, **headers: str):
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
    body["params"] = {"name": tool, "arguments": arguments}
    content, sent = enveloped(json.dumps(body).encode())
    return httpx.post(url, content=content, headers={**sent, **headers}, timeout=REPLY_S)


def test_over_http_each_message_the_sdk_cannot_take_is_answered_as_in_the_handshake_era(
    http_server,
):
    server = http_server()
    url = f"{server.url}/mcp"
    for body, answer in ANSWERED.items():
        content, headers = enveloped(body)
        reply = httpx.post(url, content=content, headers=headers)
        status = 400 if answer["id"] is None else STATUS.get(answer["error"]["code"], 200)
        assert (reply.status_code, reply.json()) == (status, answer)
    for body in UNANSWERED:
        content, headers = enveloped(body)
        ignored = httpx.post(url, content=content, headers=headers)
        assert (ignored.status_code, ignored.content) == (202, b"")
    too_large = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "' + b"a" * MAX_LINE_BYTES
    assert httpx.post(url, content=too_large, headers=MCP_HEADERS).status_code == 413
    started = mcp_reply(call(url, "start_episode", {"seed": 1}).text)
    assert not started["result"]["isError"]
    assert server.output().strip().splitlines() == [f"sqlenv-mcp: serving MCP at {url}"]


def test_over_http_hosts_origins_and_the_token_are_checked(http_server):
    server = http_server("--auth-token", "s3cret")
    url = f"{server.url}/mcp"
    authorised = {"Authorization": "Bearer s3cret"}
    assert call(url, "start_episode", {}).status_code == 401
    assert call(url, "start_episode", {}, **authorised, Host="evil.example").status_code == 421
    evil_origin = {**authorised, "Origin": "http://evil.example"}
    assert call(url, "start_episode", {}, **evil_origin).status_code == 403
    assert call(url, "start_episode", {}, **authorised).status_code == 200


def test_requests_sharing_an_id_are_each_answered_their_own(http_server):
    """Without a session two requests in flight may share an id: each is its own exchange."""
    url = f"{http_server().url}/mcp"
    started = mcp_reply(call(url, "start_episode", {"seed": 1}).text)["result"]
    handle = {"episode_id": started["structuredContent"]["episode_id"]}
    table = started["structuredContent"]["tables"][0]
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(call, url, "query", {"sql": SLOW_SQL} | handle, 7)
        time.sleep(0.1)
        second = mcp_reply(call(url, "describe", {"table": table} | handle, 7).text)
        first = mcp_reply(slow.result(REPLY_S).text)
    assert second["id"] == first["id"] == 7
    assert second["result"]["structuredContent"]["tool"] == "describe"
    assert first["result"]["structuredContent"]["tool"] == "query"


def test_over_stdio_each_message_the_sdk_cannot_take_is_answered_as_in_the_handshake_era(
    cache_dir,
):
    server = StdioServer(cache_dir)
    try:
        opening, _ = enveloped(b'{"jsonrpc": "2.0", "id": 99, "method": "tools/list"}')
        assert server.ask(opening)["result"]["tools"]  # the first request opens the era
        for line, answer in ANSWERED.items():
            assert server.ask(enveloped(line)[0]) == answer
        for line in UNANSWERED:
            server.send(enveloped(line)[0])
        server.send(b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "' + b"a" * MAX_LINE_BYTES)
        assert server.reply() == error(None, -32600, LINE_TOO_LONG)
        assert server.ask(opening)["id"] == 99  # nothing answered before it
        assert server.stop() == ""
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
