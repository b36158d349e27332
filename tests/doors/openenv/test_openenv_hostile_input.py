"""Hostile input to the OpenEnv server: an error repeats at most an excerpt of what it was sent,
and a message nested too deep is an error that leaves the session and its episode running."""

from __future__ import annotations

import json
import logging

import anyio
import httpx
import pytest
import websockets

pytestmark = pytest.mark.anyio

HUGE = "x" * 900_000
LONG = "y" * 100_000
SHORT_REPLY = 1_000  # bytes: a few hundred of message, and excerpts of what was sent
QUERY = {"type": "call_tool", "tool_name": "query", "arguments": {"sql": "SELECT 1"}}


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def socket_url(url: str, path: str) -> str:
    return url.replace("http", "ws", 1) + path


async def ask(socket, frame: dict | str) -> str:
    await socket.send(frame if isinstance(frame, str) else json.dumps(frame))
    return await socket.recv()


async def test_websocket_errors_repeat_only_an_excerpt_of_the_input(spider_server):
    frames = [
        {"type": HUGE},
        {"type": "reset", "data": HUGE},
        {"type": "reset", "data": {LONG: 1}},
        {"type": "step", "data": {"type": "call_tool", "tool_name": "query", "arguments": HUGE}},
        {"type": "step", "data": {LONG: 1}},
        {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": HUGE}},
        {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": "tools/list", LONG: 1}},
    ]
    async with websockets.connect(socket_url(spider_server, "/ws"), max_size=None) as socket:
        replies = [await ask(socket, frame) for frame in frames]
        long_id = {"jsonrpc": "2.0", "id": HUGE, "method": "tools/list"}
        refused = json.loads(await ask(socket, {"type": "mcp", "data": long_id}))
        started = json.loads(await ask(socket, {"type": "reset", "data": {"seed": 1}}))
    assert [len(reply) < SHORT_REPLY for reply in replies] == [True] * len(frames), replies
    unknown_type = json.loads(replies[0])["data"]
    assert unknown_type["code"] == "UNKNOWN_TYPE"
    assert unknown_type["message"].startswith("Unknown message type: xxxx")
    not_a_dict = json.loads(replies[1])["data"]["errors"][0]
    assert not_a_dict["msg"] == "Input should be a valid dictionary"
    assert refused["data"]["id"] is None
    assert refused["data"]["error"]["message"] == "a request id may be at most 128 characters long"
    assert started["data"]["observation"]["text"].startswith("Question: ")


async def test_json_rpc_socket_errors_repeat_only_an_excerpt_of_the_input(spider_server):
    async with websockets.connect(socket_url(spider_server, "/mcp"), max_size=None) as socket:
        unknown = json.loads(await ask(socket, {"jsonrpc": "2.0", "id": 1, "method": HUGE}))
        long_id = json.loads(await ask(socket, {"jsonrpc": "2.0", "id": HUGE, "method": "x"}))
    assert unknown["id"] == 1 and len(unknown["error"]["message"]) < SHORT_REPLY
    assert long_id["id"] is None and "at most 128 characters" in long_id["error"]["message"]


def test_http_errors_repeat_only_an_excerpt_of_the_input(spider_server):
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    requests = [
        ("/step", {"action": {"type": "call_tool", "tool_name": "query", "arguments": HUGE}}),
        ("/step", {"action": {"type": "call_tool", "tool_name": "query", LONG: 1}}),
        ("/reset", {LONG: 1}),
        ("/mcp", {**rpc, "method": HUGE}),
        ("/mcp", {**rpc, "params": {"session_id": HUGE}}),
        ("/mcp", {**rpc, LONG: 1}),
        ("/mcp", {**rpc, "id": HUGE}),
    ]
    with httpx.Client(base_url=spider_server) as http:
        replies = [http.post(path, json=body) for path, body in requests]
    assert [len(reply.content) < SHORT_REPLY for reply in replies] == [True] * len(requests)
    invalid_action = replies[0].json()["detail"][0]
    assert replies[0].status_code == 422 and invalid_action["loc"] == ["arguments"]
    assert invalid_action["input"].startswith("'xxxx") and invalid_action["input"].endswith("...")
    assert replies[2].json()["observation"]["text"].startswith("Error: reset does not take 'yyy")
    assert replies[3].json()["error"]["message"].startswith("Method not found: xxxx")
    assert replies[-1].json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "a request id may be at most 128 characters long"},
    }


async def test_a_frame_nested_too_deep_is_an_error_and_the_episode_goes_on(spider_server):
    async with websockets.connect(socket_url(spider_server, "/ws"), max_size=None) as socket:
        await ask(socket, {"type": "reset", "data": {"seed": 1}})
        replies = [
            json.loads(await ask(socket, f'{{"type":"reset","data":{{"seed":{nested(depth)}}}}}'))
            for depth in (50_000, 33)
        ]
        queried = json.loads(await ask(socket, {"type": "step", "data": QUERY}))
    for reply in replies:
        assert reply["type"] == "error" and reply["data"]["code"] == "INVALID_JSON"
        assert reply["data"]["message"] == "a message may nest arrays and objects at most 32 deep"
    assert queried["data"]["observation"]["result"]["structured_content"]["ok"]


def test_a_json_rpc_request_nested_too_deep_gets_a_parse_error(spider_server):
    call = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"query","arguments":%s}}'
    reply = httpx.post(
        f"{spider_server}/mcp",
        content=call % nested(50_000),
        headers={"content-type": "application/json"},
    )
    assert reply.status_code == 200
    assert reply.json()["error"] == {
        "code": -32700,
        "message": "a message may nest arrays and objects at most 32 deep",
    }


# ~0.3 s in a SQL worker: the reply comes after its client has gone.
SLOW_QUERY = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 800000) "
    "SELECT count(*) FROM c -- {n}"
)


async def test_clients_that_drop_their_socket_mid_call_leave_no_error_in_the_log(start_server):
    errors: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = errors.append
    with start_server() as url:
        server_log = logging.getLogger("uvicorn.error")
        server_log.addHandler(handler)
        try:
            for n in range(3):
                socket = await websockets.connect(socket_url(url, "/ws"))
                await ask(socket, {"type": "reset", "data": {"seed": n}})
                call = {**QUERY, "arguments": {"sql": SLOW_QUERY.format(n=n)}}
                await socket.send(json.dumps({"type": "step", "data": call}))
                await anyio.sleep(0.05)
                socket.transport.abort()  # gone, without a closing handshake
            await anyio.sleep(1.0)  # the replies come and find their sockets gone
            async with websockets.connect(socket_url(url, "/ws")) as socket:
                started = json.loads(await ask(socket, {"type": "reset", "data": {"seed": 9}}))
        finally:
            server_log.removeHandler(handler)
    assert [record.getMessage() for record in errors] == []
    assert started["data"]["observation"]["text"].startswith("Question: ")


async def test_a_frame_holding_a_number_too_long_to_read_is_an_error_and_the_episode_goes_on(
    spider_server,
):
    """OpenEnv ended the session (and its episode) on a number Python will not read."""
    arguments = '{"table":"t","n":' + "9" * 4_301 + "}"
    step = '{"type":"step","data":{"type":"call_tool","tool_name":"sample","arguments":%s}}'
    async with websockets.connect(socket_url(spider_server, "/ws")) as socket:
        await ask(socket, {"type": "reset", "data": {"seed": 1}})
        refused = json.loads(await ask(socket, step.replace("%s", arguments)))
        queried = json.loads(await ask(socket, {"type": "step", "data": QUERY}))
    assert refused == {
        "type": "error",
        "data": {"message": "a number may have at most 4300 digits", "code": "INVALID_JSON"},
    }
    assert queried["data"]["observation"]["result"]["structured_content"]["ok"]


async def test_a_reset_naming_its_episode_in_text_json_cannot_send_back_changes_nothing(
    spider_server,
):
    """A lone surrogate (\\ud800) reads as JSON but cannot be written as UTF-8: the episode it
    named started, replaced the running one and spent steps whose results never came back."""
    async with websockets.connect(socket_url(spider_server, "/ws")) as socket:
        started = json.loads(await ask(socket, {"type": "reset", "data": {"seed": 1}}))
        refused = json.loads(
            await ask(socket, {"type": "reset", "data": {"episode_id": "e\ud800"}})
        )
        queried = json.loads(await ask(socket, {"type": "step", "data": QUERY}))
    message = "episode_id is not valid Unicode text (it holds a lone surrogate)"
    assert refused["data"]["observation"]["error"] == {
        "error": "invalid_argument",
        "message": message,
    }
    episode_id = started["data"]["observation"]["episode_id"]
    assert (
        queried["data"]["observation"]["result"]["structured_content"]["episode_id"] == episode_id
    )


def test_http_requests_carrying_what_json_cannot_send_back_get_errors_not_500s(spider_server):
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    requests = [
        ("/step", {"action": {"type": "call_tool", "tool_name": "\ud800"}}),
        ("/mcp", {**rpc, "method": "tools/call", "params": {"name": "\ud800"}}),
        ("/mcp", {**rpc, "id": "\ud800"}),
        ("/mcp", {**rpc, "params": {"session_id": ["s"]}}),
    ]
    headers = {"content-type": "application/json"}
    with httpx.Client(base_url=spider_server, headers=headers) as http:
        step, call, rpc_id, listed = [
            http.post(path, content=json.dumps(body)) for path, body in requests
        ]
    assert step.status_code == 200 and step.json()["observation"]["tool_name"] == "\\ud800"
    assert call.status_code == 200 and call.json()["result"]["tool_name"] == "\\ud800"
    assert rpc_id.json()["error"] == {
        "code": -32600,
        "message": "a request id must be valid Unicode text (it holds a lone surrogate)",
    }
    assert listed.json()["error"] == {
        "code": -32600,
        "message": "params.session_id must be a string",
    }
