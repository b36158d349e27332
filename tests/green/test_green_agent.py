"""The green agent over A2A on 127.0.0.1: it assesses the reference purple agent with the
numbers `sqlenv eval` gives for the same policy and seed, refuses a hostile assessed agent every
way of picking or replaying its question (a second assessment of it included), sends it nothing
it does not need to play, and rejects a malformed request with its reason and no more."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import uvicorn
from a2a.compat.v0_3.conversions import to_compat_agent_card
from a2a.helpers import get_data_parts
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import AgentCard, AgentSkill, Role, Task, TaskState, TaskStatus
from a2a.utils.errors import A2AError
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from env_core.cli import main as sqlenv
from evals.green import a2a
from serving import asgi
from serving.asgi import bound_socket
from serving.local_server import LocalServer

pytestmark = pytest.mark.anyio
DEV = "dev_without_wta_1"
CARD = "/.well-known/agent-card.json"
RANDOM_SEED = 3  # the reference random player's, and the seed it is assessed with
BRIEF_KEYS = {"question", "db_id", "tables", "budget", "mcp_url"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def start_agent(*arguments: str, spider_dir, cache_dir) -> LocalServer:
    command = [sys.executable, "-m", "env_core.cli", *arguments]
    command += ["--data-dir", str(spider_dir), "--split", DEV, "--cache-dir", str(cache_dir)]
    return LocalServer(command, CARD)


@pytest.fixture(scope="module")
def green(spider_dir, cache_dir) -> Iterator[LocalServer]:
    server = start_agent("green", "--episode-detail", spider_dir=spider_dir, cache_dir=cache_dir)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def purple(spider_dir, cache_dir) -> Iterator[dict[str, LocalServer]]:
    started = {
        policy: start_agent(
            "purple", "--policy", policy, *extra, spider_dir=spider_dir, cache_dir=cache_dir
        )
        for policy, extra in (("oracle", ()), ("random", ("--seed", str(RANDOM_SEED))))
    }
    yield started
    for server in started.values():
        server.stop()


async def assess(green_url: str, request: Any) -> tuple[list[Task], Task]:
    """Send an assessment request; every task state streamed back, and the last."""
    agent = await a2a.RemoteAgent(green_url).open(streaming=True)
    text = request if isinstance(request, str) else json.dumps(request)
    try:
        states = [event async for event in agent.events(a2a.message(text))]
    finally:
        await agent.close()
    return states, states[-1]


def results_of(task: Task) -> dict[str, Any]:
    [artifact] = task.artifacts
    [data] = get_data_parts(artifact.parts)
    return data


def eval_run(policy: str, episodes: int, seed: int, spider_dir, tmp_path) -> dict[str, Any]:
    out = tmp_path / policy
    arguments = ["eval", "--policy", policy, "--episodes", str(episodes), "--seed", str(seed)]
    arguments += ["--data-dir", str(spider_dir), "--split", DEV, "--out", str(out)]
    assert sqlenv([*arguments, "--no-progress"]) == 0
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    return {"summary": json.loads((out / "summary.json").read_text()), "episodes": records}


def outline(records: list[dict[str, Any]]) -> list[tuple]:
    return [
        (r["index"], r["question_id"], r["correct"], r["total_reward"], len(r["steps"]))
        for r in records
    ]


def test_the_agent_card_describes_the_assessment(green):
    card = httpx.get(green.url + CARD, timeout=10).json()
    assert card["name"] == "sqlenv green agent" and card["capabilities"]["streaming"] is True
    interfaces = [
        (i["url"], i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]
    ]
    assert interfaces == [(green.url + "/", "JSONRPC", "1.0"), (green.url + "/", "JSONRPC", "0.3")]
    # What an A2A 0.3 client reads: the 0.3 interface as the card's own.
    assert (card["url"], card["preferredTransport"], card["protocolVersion"]) == interfaces[1]
    [skill] = card["skills"]
    assert skill["id"] == "sql-exploration-assessment" and skill["description"]


def test_the_purple_agent_card_offers_both_a2a_versions(purple):
    card = httpx.get(purple["oracle"].url + CARD, timeout=10).json()
    assert [i["protocolVersion"] for i in card["supportedInterfaces"]] == ["1.0", "0.3"]
    assert (card["url"], card["protocolVersion"]) == (purple["oracle"].url + "/", "0.3")


@pytest.mark.parametrize(
    ("policy", "episodes", "seed"), [("oracle", 20, 7), ("random", 30, RANDOM_SEED)]
)
async def test_the_reference_purple_agent_scores_what_sqlenv_eval_gives(
    green, purple, policy, episodes, seed, spider_dir, tmp_path
):
    request = {
        "participants": {"agent": purple[policy].url + "/"},
        "config": {"episodes": episodes, "seed": seed, "split": DEV},
    }
    states, final = await assess(green.url, request)
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    progress = [a2a.reply_text(s) for s in states if s.status.state == TaskState.TASK_STATE_WORKING]
    assert any(f"episode {episodes}/{episodes}" in line for line in progress)
    results = results_of(final)
    expected = eval_run(policy, episodes, seed, spider_dir, tmp_path)
    assert results["summary"] == expected["summary"]
    assert outline(results["episodes"]) == outline(expected["episodes"])
    assert results["config"]["policy"] == f"sqlenv purple agent ({policy})"
    if policy == "oracle":
        assert results["summary"]["overall"]["success"]["rate"] == 1.0
    text = a2a.reply_text(final)
    assert f"sqlenv purple agent ({policy})  all" in text


class HostileExecutor(AgentExecutor):
    """An assessed agent that tries every way to pick, restart or replay its question."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        brief = a2a.payload(context.message)
        url = brief["mcp_url"]
        seen: dict[str, Any] = {"brief": brief, "brief_text": a2a.reply_text(context.message)}
        async with (
            streamable_http_client(url) as (read, write, _),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            first = await client.call_tool("start_episode", {})
            picked = await client.call_tool("start_episode", {"question_id": f"{DEV}:1"})
            seeded = await client.call_tool("start_episode", {"seed": 5})
            again = await client.call_tool("start_episode", {})
            by_id = await client.call_tool("query", {"sql": "SELECT 1", "episode_id": "other"})
            wrong = await client.call_tool("answer", {"value": "surely not the answer"})
            second = await client.call_tool("answer", {"value": "0"})
            seen["same_episode"] = (
                again.structuredContent["episode_id"] == first.structuredContent["episode_id"]
            )
            seen["refused"] = [r.content[0].text for r in (picked, seeded, by_id, second)]
            seen["wrong"] = wrong.content[0].text
        sibling = url.replace("/assess/", "/assess/x")
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        async with httpx.AsyncClient() as http:
            seen["sibling_status"] = (await http.post(sibling, json=initialize)).status_code
        self.seen.append(seen)
        await event_queue.enqueue_event(a2a.message("I answered correctly.", role=Role.ROLE_AGENT))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


@contextmanager
def serving(
    name: str, executor: AgentExecutor, wrap: Callable[[AgentCard, Any], Any] | None = None
) -> Iterator[str]:
    """An A2A agent run by `executor` on 127.0.0.1, in this process; its URL. `wrap` stands
    in front of the agent's application, given its card."""
    listener = bound_socket("127.0.0.1", 0)  # held from now: no other socket can take it
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
    skill = AgentSkill(id=name, name=name, description=name, tags=[name])
    card = a2a.agent_card(name, name, url, skill)
    app = a2a.a2a_app(card, executor)
    app = wrap(card, app) if wrap else app
    server = uvicorn.Server(uvicorn.Config(app, log_level="error"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join()


@pytest.fixture
def hostile() -> Iterator[tuple[str, HostileExecutor]]:
    executor = HostileExecutor()
    with serving("hostile", executor) as url:
        yield url, executor


async def test_a_hostile_agent_is_refused_and_scores_nothing(green, hostile):
    url, executor = hostile
    request = {"participants": {"agent": url}, "config": {"episodes": 3, "seed": 1}}
    _, final = await assess(green.url, request)
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(executor.seen) == 3
    for seen in executor.seen:
        assert set(seen["brief"]) == BRIEF_KEYS
        assert "seed" not in seen["brief_text"].lower() and DEV not in seen["brief_text"]
        assert seen["same_episode"] and seen["sibling_status"] == 404
        picked, seeded, by_id, second = seen["refused"]
        assert "cannot be chosen or restarted" in picked and "cannot be chosen" in seeded
        assert "query does not take 'episode_id'" in by_id
        assert "has ended (was answered)" in second
        assert seen["wrong"].startswith("Incorrect.")
    results = results_of(final)
    assert results["summary"]["overall"]["success"]["successes"] == 0
    assert all(r["total_reward"] <= 0.2 and not r["correct"] for r in results["episodes"])


@pytest.mark.parametrize(
    ("request_text", "reason"),
    [
        ("assess me", "the request is not JSON"),
        ('{"participants": {}}', "participants must name one agent under the role 'agent'"),
        (
            '{"participants": {"agent": "http://127.0.0.1:9/"}, "config": {"episodes": 0}}',
            "config.episodes: 0 is not a number of episodes: give a whole number from 1, or 'all'",
        ),
        (
            '{"participants": {"agent": "http://127.0.0.1:9/"}, "config": {"rounds": 3}}',
            "config.rounds: Extra inputs are not permitted",
        ),
        (
            '{"participants": {"agent": "http://127.0.0.1:9/"}, "config": {"episodes": 5000}}',
            "config.episodes: 5000 is more than the",
        ),
        (
            '{"participants": {"agent": "http://127.0.0.1:9/"}, "config": {"split": "nosuch"}}',
            "config.split: split 'nosuch' cannot be served; "
            "available: dev, dev_without_wta_1, train_spider_min",
        ),
        (
            '{"participants": {"agent": "not a url"}}',
            "participants.agent: Input should be a valid URL",
        ),
        (
            '{"participants": {"agent": "http://127.0.0.1:9/"}, '
            '"config": {"episodes": "all", "episode_timeout_s": 3600}}',
            "config: 896 episodes of up to 3600 s each may take over 96 hours, this green "
            "agent's limit for an assessment: ask for fewer episodes or a shorter "
            "episode_timeout_s",
        ),
        (  # the budgets --max-steps takes (STEP_BUDGET_RANGE)
            '{"participants": {"agent": "http://127.0.0.1:9/"}, "config": {"max_steps": 1001}}',
            "config.max_steps: Input should be less than or equal to 1000",
        ),
        (
            '{"participants": {"agent": "http://127.0.0.1:9/"}, "config": {"seed": "7"}}',
            "config.seed: '7' is not a seed: give a whole number",
        ),
    ],
)
async def test_a_malformed_request_is_rejected_with_its_reason(
    green, request_text, reason, spider_dir
):
    _, final = await assess(green.url, request_text)
    assert final.status.state == TaskState.TASK_STATE_REJECTED
    said = a2a.reply_text(final)
    assert reason in said
    assert str(spider_dir) not in said and "shared/data" not in said


async def test_an_unreachable_agent_fails_the_task_with_its_url_only(green):
    not_an_agent = green.url + "/nothing/"  # answers 404
    with bound_socket("127.0.0.1", 0) as unheard:  # bound, never listening: connecting is refused
        dead = f"http://127.0.0.1:{unheard.getsockname()[1]}/"
        for url in (dead, not_an_agent):
            _, final = await assess(green.url, {"participants": {"agent": url}})
            assert final.status.state == TaskState.TASK_STATE_FAILED
            assert a2a.reply_text(final) == f"cannot reach the A2A agent at {url!r}"
    logged = green.output()  # the reasons, for the operator
    assert re.search(f"cannot reach the A2A agent at {re.escape(dead)}: .+", logged)
    assert re.search(f"cannot reach the A2A agent at {re.escape(not_an_agent)}: .*404", logged)


class PractisingExecutor(AgentExecutor):
    """An assessed agent that, sent its episode, asks the green agent for a second assessment of
    the same plan (the request it knows it is assessed under), to try answers there first."""

    def __init__(self, green_url: str, request: dict[str, Any]) -> None:
        self.green_url = green_url
        self.request = request
        self.practice: list[Task] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        if not self.practice:
            self.practice.append((await assess(self.green_url, self.request))[1])
        await event_queue.enqueue_event(a2a.message("done", role=Role.ROLE_AGENT))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


async def test_a_question_being_assessed_is_played_by_no_other_assessment(green, purple):
    config = {"episodes": 2, "seed": 11, "split": DEV}
    practice = {"participants": {"agent": purple["oracle"].url + "/"}, "config": config}
    executor = PractisingExecutor(green.url, practice)
    with serving("practising", executor) as url:
        _, first = await assess(green.url, {"participants": {"agent": url}, "config": config})
    assert first.status.state == TaskState.TASK_STATE_COMPLETED
    [refused] = executor.practice
    assert refused.status.state == TaskState.TASK_STATE_REJECTED
    assert a2a.reply_text(refused) == (
        "a question of this plan is in an assessment in progress on this green agent; try "
        "again when that assessment ends"
    )
    assert results_of(first)["summary"]["overall"]["success"]["successes"] == 0
    _, after = await assess(green.url, practice)  # the first has ended: its questions are free
    assert after.status.state == TaskState.TASK_STATE_COMPLETED
    assert results_of(after)["summary"]["overall"]["success"]["rate"] == 1.0


async def test_a_split_with_no_playable_question_is_rejected(spider_dir, cache_dir, tmp_path):
    for name in ("tables.json", "database", f"{DEV}.json"):
        (tmp_path / name).symlink_to(spider_dir / name)
    unplayable = [{"db_id": "no_such_database", "question": "How many?", "query": "SELECT 1"}]
    (tmp_path / "unplayable.json").write_text(json.dumps(unplayable))
    server = start_agent("green", spider_dir=tmp_path, cache_dir=cache_dir)
    try:
        request = {"participants": {"agent": "http://127.0.0.1:9/"}}
        _, final = await assess(server.url, {**request, "config": {"split": "unplayable"}})
    finally:
        server.stop()
    assert final.status.state == TaskState.TASK_STATE_REJECTED
    assert a2a.reply_text(final) == (
        "config.split: split 'unplayable' has no question that can be played here; "
        f"other splits: {DEV}"
    )


@contextmanager
def card_server(card: Callable[[], Awaitable[bytes]]) -> Iterator[str]:
    """An assessed agent address whose agent card is what `card` answers, on 127.0.0.1."""

    async def app(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        body = await card()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    listener = bound_socket("127.0.0.1", 0)
    config = uvicorn.Config(app, log_level="error", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    finally:
        server.should_exit = True
        thread.join()


async def huge_card() -> bytes:
    """A valid card whose description is over the bound (the SDK read any card whole)."""
    skill = AgentSkill(id="x", name="x", description="x", tags=[])
    card = a2a.agent_card("huge", "x" * (2 * a2a.MAX_CARD_BYTES), "http://127.0.0.1:9/", skill)
    return json.dumps(agent_card_to_dict(card)).encode()


async def no_card() -> bytes:
    await asyncio.Event().wait()  # never answers: the SDK waited an hour
    return b""


@pytest.mark.parametrize("card", [huge_card, no_card])
async def test_an_assessed_agent_card_too_large_or_too_slow_fails_the_task_soon(green, card):
    with card_server(card) as url:
        _, final = await assess(green.url, {"participants": {"agent": url}})
    assert final.status.state == TaskState.TASK_STATE_FAILED
    assert a2a.reply_text(final) == f"cannot reach the A2A agent at {url!r}"


def test_a_request_body_over_the_limit_is_refused_as_it_arrives(green):
    def chunks() -> Iterator[bytes]:  # no declared length: the SDK read any such body whole
        for _ in range(4):
            yield b" " * a2a.MAX_REQUEST_BYTES

    reply = httpx.post(green.url + "/", content=chunks(), timeout=30)
    assert reply.status_code == 413
    assert reply.json()["error"]["message"] == a2a.REQUEST_TOO_LARGE


async def test_the_agent_keeps_a_bounded_number_of_ended_tasks(monkeypatch):
    monkeypatch.setattr(a2a, "MAX_ENDED_TASKS", 3)
    store = a2a.EndedTasksBounded()
    for index in range(6):
        state = TaskState.TASK_STATE_WORKING if index == 1 else TaskState.TASK_STATE_REJECTED
        task = Task(id=f"t{index}", context_id="c", status=TaskStatus(state=state))
        await store.save(task, ServerCallContext())
    kept = [f"t{index}" for index in range(6) if await store.get(f"t{index}", ServerCallContext())]
    assert kept == ["t1", "t3", "t4", "t5"]  # the oldest ended ones went first


@pytest.mark.parametrize(
    ("request_text", "reason"),
    [
        (
            '{"participants": {"agent": "http://127.0.0.1:9/"}, "config": {"split": ""}}',
            "config.split: String should have at least 1 character",
        ),
        ("[" * 100_000 + "]" * 100_000, "the request is not JSON"),
        (
            json.dumps(
                {
                    "participants": {"agent": "http://127.0.0.1:9/"},
                    "config": {"episodes": "x" * 100_000},
                }
            ),
            f"config.episodes: '{'x' * 39}... is not a number of episodes",
        ),
        (
            json.dumps(
                {"participants": {f"role{n}": "http://127.0.0.1:9/" for n in range(20_000)}}
            ),
            "participants must name one agent under the role 'agent' (got: 'role0', 'role1'",
        ),
    ],
)
async def test_a_request_the_agent_cannot_take_ends_its_task_with_a_short_reason(
    green, request_text, reason
):
    _, final = await assess(green.url, request_text)
    assert final.status.state == TaskState.TASK_STATE_REJECTED
    said = a2a.reply_text(final)
    assert reason in said and len(said) < 1_000


SLOW_SQL = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 3000000) "
    "SELECT count(*) FROM c"
)


class OneCallExecutor(AgentExecutor):
    """An assessed agent that starts its episode and makes one call."""

    def __init__(self, tool: str, arguments: dict[str, Any]) -> None:
        self.tool = tool
        self.arguments = arguments

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        url = a2a.payload(context.message)["mcp_url"]
        async with (
            streamable_http_client(url) as (read, write, _),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            await client.call_tool("start_episode", {})
            await client.call_tool(self.tool, self.arguments)
        await event_queue.enqueue_event(a2a.message("done", role=Role.ROLE_AGENT))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


async def test_assessments_at_once_share_the_agents_sql_workers(spider_dir, cache_dir):
    """Each assessment had SQL workers of its own: 30 at once ran 30 workers, whatever
    --sql-workers said."""
    server = start_agent("green", "--sql-workers", "1", spider_dir=spider_dir, cache_dir=cache_dir)
    workers: set[int] = set()
    finished = asyncio.Event()

    async def count_workers() -> None:
        process = psutil.Process(server.process.pid)
        while not finished.is_set():
            workers.update(child.pid for child in process.children(recursive=True))
            await asyncio.sleep(0.02)

    try:
        with serving("slow", OneCallExecutor("query", {"sql": SLOW_SQL})) as url:
            counting = asyncio.create_task(count_workers())
            finals = await asyncio.gather(
                *(
                    assess(
                        server.url,
                        {"participants": {"agent": url}, "config": {"episodes": 1, "seed": seed}},
                    )
                    for seed in (21, 22, 23)
                )
            )
            finished.set()
            await counting
    finally:
        server.stop()
    assert [final.status.state for _, final in finals] == [TaskState.TASK_STATE_COMPLETED] * 3
    assert len(workers) == 1


class WaitingExecutor(AgentExecutor):
    """An assessed agent that replies once it is told to."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.go = threading.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.started.set()
        await asyncio.to_thread(self.go.wait, 60)
        await event_queue.enqueue_event(a2a.message("done", role=Role.ROLE_AGENT))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


async def test_assessments_at_once_are_at_most_max_episodes(spider_dir, cache_dir):
    """Each assessment holds an episode: 261 ran at once with --max-episodes 256."""
    server = start_agent("green", "--max-episodes", "1", spider_dir=spider_dir, cache_dir=cache_dir)
    executor = WaitingExecutor()
    try:
        with serving("waiting", executor) as url:

            def request(seed: int) -> dict[str, Any]:
                return {"participants": {"agent": url}, "config": {"episodes": 1, "seed": seed}}

            first = asyncio.create_task(assess(server.url, request(1)))
            assert await asyncio.to_thread(executor.started.wait, 60)
            _, refused = await assess(server.url, request(2))
            executor.go.set()
            _, ended = await first
            _, after = await assess(server.url, request(2))
    finally:
        server.stop()
    assert refused.status.state == TaskState.TASK_STATE_REJECTED
    assert a2a.reply_text(refused) == (
        "as many assessments as this green agent runs at once (1, its --max-episodes) are "
        "running; try again when one ends"
    )
    assert ended.status.state == after.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_message_to_a_running_assessment_leaves_it_running(spider_dir, cache_dir):
    """A second message naming a running assessment's task started a second run of it, which
    marked the task rejected: the first ran on unseen, its result lost."""
    server = start_agent("green", spider_dir=spider_dir, cache_dir=cache_dir)
    executor = WaitingExecutor()
    try:
        with serving("waiting", executor) as url:
            request = {"participants": {"agent": url}, "config": {"episodes": 1, "seed": 4}}
            assessing = await a2a.RemoteAgent(server.url).open(streaming=True)
            other = await a2a.RemoteAgent(server.url).open(streaming=True)
            try:
                states = assessing.events(a2a.message(json.dumps(request)))
                task = await anext(states)
                assert await asyncio.to_thread(executor.started.wait, 60)
                sent = a2a.message("and again", context_id=task.context_id, task_id=task.id)
                with pytest.raises(A2AError, match=re.escape(a2a.FOLLOW_UP)):
                    [event async for event in other.events(sent)]
                executor.go.set()
                final = [state async for state in states][-1]
            finally:
                await assessing.close()
                await other.close()
    finally:
        server.stop()
    assert final.status.state == TaskState.TASK_STATE_COMPLETED


NODE_CLIENT = Path(__file__).with_name("request_assessment.mjs")
JS_SDK = Path(__file__).resolve().parents[2] / "node_modules" / "@a2a-js" / "sdk"
# The JSON-RPC methods that send a message, in each A2A version.
SEND_METHODS = {
    "1.0": {"SendMessage", "SendStreamingMessage"},
    "0.3": {"message/send", "message/stream"},
}
STREAMING = {"1.0": "SendStreamingMessage", "0.3": "message/stream"}


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
def test_a_client_of_either_a2a_version_requests_an_assessment(green, purple, protocol):
    """The A2A JS SDK (1.3) as it comes speaks 1.0 only: it failed with 'No compatible
    transport found' on the 0.3 agent; with its legacy compatibility, it speaks 0.3."""
    if not JS_SDK.exists() or shutil.which("node") is None:
        pytest.fail(f"node and {JS_SDK} are needed: run `npm ci` (make test does)")
    request = {
        "participants": {"agent": purple["oracle"].url + "/"},
        "config": {"episodes": 3, "seed": 5, "split": DEV},
    }
    command = ["node", str(NODE_CLIENT), green.url + "/", protocol, json.dumps(request)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["methods"] == [STREAMING[protocol]]
    assert seen["state"] == "TASK_STATE_COMPLETED"
    [results] = seen["data"]
    assert results["summary"]["overall"]["success"]["rate"] == 1.0
    assert results["config"]["episodes"] == 3


def speaking_only(protocol: str, sent: list[str]) -> Callable[[AgentCard, Any], Any]:
    """An assessed agent that speaks one A2A version: its card in that version's layout only (a
    0.3 card names its endpoint in `url`, a 1.0 card in `supportedInterfaces`), the other
    version's methods refused; `sent` gets each method it is sent."""

    def wrap(card: AgentCard, app: Any) -> Any:
        if protocol == "0.3":
            layout = to_compat_agent_card(card).model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
        else:
            newest = AgentCard()
            newest.CopyFrom(card)
            del newest.supported_interfaces[1:]
            layout = agent_card_to_dict(newest)
        assert ("supportedInterfaces" in layout) == (protocol == "1.0")

        async def only(scope, receive, send) -> None:
            if scope["type"] == "http" and scope["path"] == CARD:
                await asgi.respond_json(send, 200, layout)
                return
            if scope["type"] == "http" and scope["method"] == "POST":
                body = await asgi.read_body(scope, receive, a2a.MAX_REQUEST_BYTES)
                request = json.loads(body)
                sent.append(request["method"])
                if request["method"] not in SEND_METHODS[protocol]:
                    refusal = asgi.rpc_error(request["id"], -32601, "Method not found")
                    await asgi.respond_json(send, 200, refusal)
                    return
                receive = asgi.replaying(body, receive)
            await app(scope, receive, send)

        return only

    return wrap


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_an_assessed_agent_of_either_a2a_version_is_assessed(green, protocol):
    """The green agent spoke 0.3 only: an assessed agent with a 1.0 card was reported as 'cannot
    reach the A2A agent'."""
    sent: list[str] = []
    answering = OneCallExecutor("answer", {"value": "0"})
    with serving("versioned", answering, speaking_only(protocol, sent)) as url:
        request = {"participants": {"agent": url}, "config": {"episodes": 2, "seed": 9}}
        _, final = await assess(green.url, request)
    assert final.status.state == TaskState.TASK_STATE_COMPLETED, a2a.reply_text(final)
    assert len(sent) == 2 and set(sent) <= SEND_METHODS[protocol]
    episodes = results_of(final)["episodes"]
    assert [len(episode["steps"]) for episode in episodes] == [1, 1]  # each its answer


def test_a_task_is_reached_by_its_id_only(green):
    """A2A 1.0's ListTasks listed every requester's tasks to anyone (the SDK lists a
    requester's own, and with no accounts all requesters are one)."""

    def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
        request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return httpx.post(green.url + "/", json=request, headers={"A2A-Version": "1.0"}).json()

    sent = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "not an assessment"}]}
    task_id = call("SendMessage", {"message": sent})["result"]["task"]["id"]
    listed = call("ListTasks", {})
    assert listed["error"]["message"] == a2a.NOT_LISTED and task_id not in json.dumps(listed)
    assert call("GetTask", {"id": task_id})["result"]["id"] == task_id


async def test_a_split_not_served_is_named_among_a_spider_syn_folders_splits(spider_dir, cache_dir):
    """Spider-Syn ships no databases: its splits are listed with the databases folder given."""
    command = [sys.executable, "-m", "env_core.cli", "green", "--split", "dev"]
    command += ["--data-dir", str(spider_dir.parent / "spider-syn"), "--cache-dir", str(cache_dir)]
    server = LocalServer([*command, "--databases-dir", str(spider_dir / "database")], CARD)
    try:
        request = {"participants": {"agent": "http://127.0.0.1:9/"}}
        _, final = await assess(server.url, {**request, "config": {"split": "nosuch"}})
    finally:
        server.stop()
    assert final.status.state == TaskState.TASK_STATE_REJECTED
    assert a2a.reply_text(final) == (
        "config.split: split 'nosuch' cannot be served; available: dev, train_spider"
    )
