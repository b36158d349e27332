"""The green agent as its operator runs it, against participants and requesters that try to
take more than they are given: what it reads from an assessed agent is bounded as it arrives, an
assessment is timed and holds only the question in play, requests need the operator's token,
a requester is told the summary only, finished episodes outlive the agent, and an assessed agent's
task ends with its episode."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from a2a.helpers import get_data_parts, new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.tasks import TaskUpdater
from a2a.types import AgentSkill, Role, Task, TaskState
from google.protobuf.json_format import MessageToDict
from process_memory import MIB, PeakRSS, tree_rss
from test_green_agent import DEV, serving, start_agent

from evals.green import a2a
from evals.plan import plan_episodes
from evals.run_folder import RunFolder
from serving.asgi import bound_socket

pytestmark = pytest.mark.anyio
TOKEN = "operator-secret"
AUTHORIZED = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def private_green(spider_dir, cache_dir, tmp_path_factory):
    """A green agent that takes requests with its token, tells the summary only and writes
    each assessment's run folder; its runs folder."""
    runs = tmp_path_factory.mktemp("runs")
    os.environ["SQLENV_ASSESSMENT_TOKEN"] = TOKEN
    try:
        server = start_agent(
            "green", "--runs-dir", str(runs), spider_dir=spider_dir, cache_dir=cache_dir
        )
    finally:
        del os.environ["SQLENV_ASSESSMENT_TOKEN"]
    yield server, runs
    server.stop()


@pytest.fixture(scope="module")
def oracle(spider_dir, cache_dir):
    server = start_agent("purple", "--policy", "oracle", spider_dir=spider_dir, cache_dir=cache_dir)
    yield server.url + "/"
    server.stop()


async def assess(green_url: str, request: dict[str, Any]) -> tuple[list[Task], Task]:
    agent = await a2a.RemoteAgent(green_url, headers=AUTHORIZED).open(streaming=True)
    try:
        states = [event async for event in agent.events(a2a.message(json.dumps(request)))]
    finally:
        await agent.close()
    return states, states[-1]


def run_folder_of(runs, task: Task) -> RunFolder:
    return RunFolder(runs / task.id)


def test_requests_need_the_operators_token_and_the_card_says_so(private_green):
    server, _ = private_green
    card = httpx.get(server.url + "/.well-known/agent-card.json", timeout=10).json()
    assert card["security"] == [{"bearer": []}]
    assert card["securitySchemes"]["bearer"]["scheme"] == "bearer"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}}
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        refused = httpx.post(server.url + "/", json=body, headers=headers, timeout=10)
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    let_in = httpx.post(server.url + "/", json=body, headers=AUTHORIZED, timeout=10)
    assert let_in.status_code == 200 and let_in.json()["error"]["code"] == -32001  # no such task


async def test_the_requester_is_told_the_summary_and_the_run_folder_keeps_the_episodes(
    private_green, oracle
):
    server, runs = private_green
    request = {"participants": {"agent": oracle}, "config": {"episodes": 3, "seed": 5}}
    states, final = await assess(server.url, request)
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    [artifact] = final.artifacts
    [data] = get_data_parts(artifact.parts)
    assert set(data) == {"config", "summary"}
    told = json.dumps([MessageToDict(state) for state in states])
    assert f"{DEV}:" not in told and "correct so far" not in told
    progress = [a2a.reply_text(s) for s in states if s.status.state == TaskState.TASK_STATE_WORKING]
    assert "episode 3/3 played" in progress
    folder = run_folder_of(runs, final)
    records = folder.read_episodes()
    assert sorted(records) == [0, 1, 2] and all(r.correct for r in records.values())
    assert json.loads(folder.summary_file.read_text()) == data["summary"]


class StallingExecutor(AgentExecutor):
    """An assessed agent that replies at once to its first `quick` episodes, then never; it
    tells when that one arrives, and records a cancel of its task."""

    def __init__(self, quick: int) -> None:
        self.quick = quick
        self.played = 0
        self.stalled = threading.Event()
        self.cancelled = threading.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.played += 1
        if self.played <= self.quick:
            await event_queue.enqueue_event(a2a.message("done", role=Role.ROLE_AGENT))
            return
        task = new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED)
        await event_queue.enqueue_event(task)
        await TaskUpdater(event_queue, task.id, task.context_id).start_work()
        self.stalled.set()
        await asyncio.Event().wait()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.cancelled.set()
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


async def test_finished_episodes_outlive_the_agent(spider_dir, cache_dir, tmp_path):
    """Killing the green agent mid-assessment lost the episodes it had finished."""
    server = start_agent(
        "green", "--runs-dir", str(tmp_path), spider_dir=spider_dir, cache_dir=cache_dir
    )
    executor = StallingExecutor(quick=2)
    try:
        with serving("stalling", executor) as url:
            request = {"participants": {"agent": url}, "config": {"episodes": 4, "seed": 2}}
            agent = await a2a.RemoteAgent(server.url).open(streaming=True)
            states = agent.events(a2a.message(json.dumps(request)))
            task = await anext(states)
            assert await asyncio.to_thread(executor.stalled.wait, 60)
            os.kill(server.process.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):  # the stream breaks off as the agent dies
                [state async for state in states]
            await agent.close()
    finally:
        server.stop()
    folder = RunFolder(tmp_path / task.id)
    records = folder.read_episodes()
    assert sorted(records) == [0, 1]
    assert all(record.notes == {} and not record.correct for record in records.values())
    assert json.loads(folder.config_file.read_text())["episodes"] == 4


async def test_an_assessed_agents_task_is_cancelled_when_its_episode_times_out(private_green):
    """The assessed agent's task ran on after the green agent had given up on its episode."""
    server, _ = private_green
    executor = StallingExecutor(quick=0)
    with serving("stalling", executor) as url:
        config = {"episodes": 1, "seed": 3, "episode_timeout_s": 1}
        _, final = await assess(server.url, {"participants": {"agent": url}, "config": config})
        assert await asyncio.to_thread(executor.cancelled.wait, 20)
    assert final.status.state == TaskState.TASK_STATE_COMPLETED


async def test_an_assessed_agents_task_is_cancelled_when_its_assessment_is(private_green):
    server, _ = private_green
    executor = StallingExecutor(quick=0)
    with serving("stalling", executor) as url:
        request = {"participants": {"agent": url}, "config": {"episodes": 1, "seed": 4}}
        agent = await a2a.RemoteAgent(server.url, headers=AUTHORIZED).open(streaming=True)
        try:
            states = agent.events(a2a.message(json.dumps(request)))
            task = await anext(states)
            assert await asyncio.to_thread(executor.stalled.wait, 60)
            cancel = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tasks/cancel",
                "params": {"id": task.id},
            }
            async with httpx.AsyncClient(headers=AUTHORIZED) as http:
                answer = (await http.post(server.url + "/", json=cancel, timeout=10)).json()
            assert answer["result"]["status"]["state"] == "canceled"
            assert await asyncio.to_thread(executor.cancelled.wait, 20)
        finally:
            await agent.close()


async def test_questions_not_yet_played_stay_free_for_other_assessments(
    private_green, oracle, spider_catalog
):
    """An assessment held every question of its plan for as long as it ran: one asking for
    them all, with an assessed agent that never replied, locked every other request out."""
    server, _ = private_green
    questions = spider_catalog.splits[DEV].questions
    first, second = (task.question_id for task in plan_episodes(questions, 2, 8))
    seed = next(
        seed
        for seed in range(1000)
        if second in (ids := {t.question_id for t in plan_episodes(questions, 40, seed)})
        and first not in ids
    )
    executor = StallingExecutor(quick=0)
    with serving("stalling", executor) as url:
        config = {"episodes": 2, "seed": 8, "episode_timeout_s": 20}
        holding = asyncio.create_task(
            assess(server.url, {"participants": {"agent": url}, "config": config})
        )
        assert await asyncio.to_thread(executor.stalled.wait, 60)
        again = {"participants": {"agent": oracle}, "config": {"episodes": 1, "seed": 8}}
        _, refused = await assess(server.url, again)
        other = {"participants": {"agent": oracle}, "config": {"episodes": 40, "seed": seed}}
        _, played = await assess(server.url, other)
        holding.cancel()
    assert played.status.state == TaskState.TASK_STATE_COMPLETED
    assert refused.status.state == TaskState.TASK_STATE_REJECTED  # its question is in play


@contextmanager
def flooding_agent(streaming: bool, megabytes: int) -> Iterator[str]:
    """An assessed agent whose reply to any message is one text part of `megabytes` MiB, sent as
    a JSON body or (`streaming`) one server-sent event."""
    listener = bound_socket("127.0.0.1", 0)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
    skill = AgentSkill(id="flood", name="flood", description="flood", tags=[])
    card = a2a.agent_card("flood", "flood", url, skill)
    card.capabilities.streaming = streaming
    card_body = json.dumps(agent_card_to_dict(card)).encode()

    async def app(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] == "GET":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": card_body})
            return
        request = json.loads(await _body(receive))
        kind = b"text/event-stream" if streaming else b"application/json"
        head = json.dumps({"jsonrpc": "2.0", "id": request["id"]})[:-1].encode()
        head += b', "result": {"kind": "message", "role": "agent", "messageId": "m", '
        head += b'"parts": [{"kind": "text", "text": "'
        tail = b'"}]}}'
        if streaming:
            head, tail = b"data: " + head, tail + b"\n\n"
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]}
        )
        chunk = b"x" * MIB
        for piece in (head, *(chunk for _ in range(megabytes)), tail):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        threading.Event().wait(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join()


async def _body(receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


@pytest.mark.parametrize("streaming", [False, True], ids=["message-send", "event-stream"])
async def test_an_assessed_agents_reply_is_read_within_its_bound(private_green, streaming):
    """A 300 MB reply took the green agent from 138 MB to a 1,186 MB peak, 598 MB held."""
    server, runs = private_green
    pid = server.process.pid
    with flooding_agent(streaming, megabytes=300) as url:
        request = {"participants": {"agent": url}, "config": {"episodes": 2, "seed": 6}}
        with PeakRSS(pid, interval_s=0.02) as peak:
            _, final = await assess(server.url, request)
    after = tree_rss(pid)
    print(
        f"\nreply of 300 MiB x 2 episodes ({'stream' if streaming else 'message/send'}): "
        f"green agent RSS before {peak.before / MIB:.0f} MiB, peak {peak.bytes / MIB:.0f}, "
        f"after {after / MIB:.0f}"
    )
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    records = run_folder_of(runs, final).read_episodes()
    assert [record.notes for record in records.values()] == [{"participant_errors": 1}] * 2
    assert peak.growth_mib < 64 and (after - peak.before) / MIB < 32


async def test_unreadable_requests_get_json_rpc_errors_and_no_traceback(private_green):
    server, _ = private_green
    cases = [
        (b"{not json", -32700),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "\xff"}}', -32700),
        (
            b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "tasks/get", "params": {"id": "x"}}',
            -32600,
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "\\udc00"}}',
            -32600,
        ),
    ]
    for body, code in cases:
        reply = httpx.post(server.url + "/", content=body, headers=AUTHORIZED, timeout=10)
        assert reply.status_code == 400, body
        assert reply.json()["error"]["code"] == code and reply.json()["id"] is None
    assert "Traceback" not in server.output()


async def test_an_assessed_agents_url_credentials_are_never_logged(private_green):
    server, _ = private_green
    with bound_socket("127.0.0.1", 0) as unheard:  # bound, never listening
        address = f"127.0.0.1:{unheard.getsockname()[1]}"
        request = {"participants": {"agent": f"http://someone:hunter2@{address}/"}}
        _, final = await assess(server.url, request)
    assert final.status.state == TaskState.TASK_STATE_FAILED
    logged = server.output()
    assert f"cannot reach the A2A agent at http://{address}/" in logged
    assert "hunter2" not in logged


async def test_the_purple_agent_plays_only_where_its_operator_allows(spider_dir, cache_dir):
    """It connected to any mcp_url it was sent (with a hosted model, on its operator's
    tokens)."""
    server = start_agent("purple", "--policy", "random", spider_dir=spider_dir, cache_dir=cache_dir)
    brief = {"question": "q", "db_id": "d", "tables": [], "budget": 3}
    try:
        purple = await a2a.RemoteAgent(server.url).open()
        try:
            elsewhere = {**brief, "mcp_url": "http://sql.example.org/mcp"}
            said = await purple.ask(a2a.message("play", elsewhere))
        finally:
            await purple.close()
    finally:
        server.stop()
    assert said == "this agent plays only at MCP addresses of loopback addresses"


def sqlenv_assess(*arguments: str, cache_dir, token: str | None = None):
    environment = {key: value for key, value in os.environ.items() if not key.startswith("SQLENV")}
    environment["SQLENV_CACHE_DIR"] = str(cache_dir)
    if token is not None:
        environment["SQLENV_ASSESSMENT_TOKEN"] = token
    command = [sys.executable, "-m", "env_core.cli", "assess", *arguments]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=300, env=environment, check=False
    )


def test_one_command_runs_an_assessment_end_to_end(spider_dir, cache_dir, tmp_path):
    """Starting an assessment took a green agent, a purple agent and an A2A envelope written
    by hand."""
    out = tmp_path / "result.json"
    data = ["--data-dir", str(spider_dir), "--split", DEV]
    done = sqlenv_assess(
        "--policy",
        "oracle",
        "--episodes",
        "3",
        "--seed",
        "5",
        "--out",
        str(out),
        *data,
        cache_dir=cache_dir,
    )
    assert done.returncode == 0, done.stderr
    assert "all       3         100.0%" in done.stdout.splitlines()[1], done.stdout
    assert [line for line in done.stderr.splitlines() if line.startswith("episode ")] == [
        f"episode {n}/3 played" for n in (1, 2, 3)
    ]
    assert json.loads(out.read_text())["summary"]["overall"]["success"]["rate"] == 1


def test_assess_brings_the_green_agents_token(private_green, oracle, cache_dir):
    server, _ = private_green
    given = ["--green", server.url + "/", "--agent", oracle, "--episodes", "1"]
    refused = sqlenv_assess(*given, cache_dir=cache_dir)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    assert refused.stderr.strip().splitlines()[-1].startswith("sqlenv assess: "), refused.stderr
    let_in = sqlenv_assess(*given, cache_dir=cache_dir, token=TOKEN)
    assert let_in.returncode == 0, let_in.stderr
