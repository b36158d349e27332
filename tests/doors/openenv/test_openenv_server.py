"""The OpenEnv server on Spider dev, through the typed client over WebSocket."""

from __future__ import annotations

import gc
import logging
import threading
import time
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from mcp.shared.memory import create_connected_server_and_client_session as connect_mcp
from openenv.core import GenericEnvClient
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.mcp_client import MCPToolClient
from openenv_testing import SPIDER_SPLIT, play_oracle, served_record, step_record

from doors.openenv.client import SQLAction, SQLEnvClient
from doors.trl.environment import SQLEnvTRL
from doors.trl.remote import LOST, RemoteSQLEnvTRL
from env_core.answers import gold_as_json
from env_core.errors import UnknownQuestionError
from env_core.factory import open_manager
from env_core.manager import EpisodeManager
from env_core.oracle import play_oracle as play_in_process
from env_core.settings import Settings
from env_core.tools import TOOLS
from serving.server_reads import ServerError
from sqlenv_mcp.server import build_episode_server

pytestmark = pytest.mark.anyio


async def test_full_episode_on_spider_dev(spider_server, spider_catalog):
    async with SQLEnvClient(base_url=spider_server) as env:
        start = await env.reset(question_id=f"{SPIDER_SPLIT}:1")
        assert start.reward is None and not start.done
        assert start.observation.data["db_id"] == "concert_singer"
        assert "singer" in start.observation.data["tables"]
        assert start.observation.text.startswith("Question: ")

        question = spider_catalog.question(f"{SPIDER_SPLIT}:1")
        results = await play_oracle(env, question, start.observation.data["budget"])

        *exploration, final = results
        assert all(r.observation.ok and not r.done for r in exploration)
        assert final.observation.text == "Correct. The episode is over."
        assert final.reward == 1.0 and final.done
        state = await env.state()
        assert state.step_count == len(results)
        assert state.budget_left == start.observation.data["budget"] - len(results)
        assert state.done and "question_id" not in state.model_dump()
        assert state.total_reward == pytest.approx(sum(r.reward for r in results))

        after = await env.query("SELECT 1")
        assert after.done and after.reward == 0.0
        assert "has ended" in after.observation.error


async def test_agent_mistakes_are_observations_and_cost_a_step(spider_server):
    async with SQLEnvClient(base_url=spider_server) as env:
        await env.reset(question_id=f"{SPIDER_SPLIT}:1")
        result = await env.describe("singers")
        assert not result.observation.ok and not result.done
        assert result.observation.data["error"] == "unknown_table"
        assert result.observation.text.startswith("Error: no such table: singers; tables are:")
        assert result.reward < 0
        unknown_tool = await env.call("drop_table", table="singer")
        assert unknown_tool.observation.error.startswith("unknown tool 'drop_table'")
        assert (await env.state()).step_count == 1


def test_sync_client_and_classic_actions(spider_server):
    with SQLEnvClient(base_url=spider_server).sync() as env:
        env.reset(question_id=f"{SPIDER_SPLIT}:1")
        described = env.step(SQLAction(action_type="DESCRIBE", argument="singer"))
        assert described.observation.data["table"] == "singer"
        counted = env.step(SQLAction(action_type="QUERY", argument="SELECT count(*) FROM singer"))
        assert counted.observation.data["rows"] == [[6]]
        assert env.sample("singer", 2).observation.data["rows"][1][0] == 2
        answered = env.step(SQLAction(action_type="ANSWER", argument="6"))
        assert answered.done


async def test_tool_list_is_the_engine_definition(spider_server):
    async with SQLEnvClient(base_url=spider_server) as env:
        tools = await env.list_tools()
    assert [(t.name, t.description, t.input_schema) for t in tools] == [
        (spec.name, spec.description, spec.parameters) for spec in TOOLS
    ]


async def test_same_text_data_and_rewards_as_the_engine(spider_server, spider_settings):
    manager = open_manager(spider_settings)
    for seed in (3, 11):
        episode = manager.create(seed=seed)
        in_process = play_in_process(episode)
        async with SQLEnvClient(base_url=spider_server) as env:
            start = await env.reset(seed=seed)
            assert start.observation.text == episode.start.text
            served = await play_oracle(env, episode.question, start.observation.data["budget"])
        assert [served_record(r) for r in served] == [
            step_record(r.text, r.data, r.reward, r.done) for r in in_process
        ]
    manager.shutdown()


async def test_same_text_structured_result_and_rewards_as_the_mcp_door(
    spider_server, spider_catalog
):
    question = spider_catalog.question(f"{SPIDER_SPLIT}:1")
    calls = [
        ("describe", {"table": "singer"}),
        ("sample", {"table": "singer", "n": 2}),
        ("query", {"sql": "SELECT count(*) FROM singers"}),
        ("query", {"sql": question.sql}),
        ("answer", {"value": gold_as_json(question.gold)}),
    ]
    manager = EpisodeManager(spider_catalog, Settings(split=SPIDER_SPLIT))

    def comparable(text: str, structured: dict) -> tuple:
        structured = {key: value for key, value in structured.items() if key != "episode_id"}
        structured["data"] = step_record(text, structured["data"], None, False)[1]
        return text, structured

    async with connect_mcp(build_episode_server(manager)) as mcp:
        await mcp.call_tool("start_episode", {"question_id": question.id})
        through_mcp = [await mcp.call_tool(tool, arguments) for tool, arguments in calls]
    async with GenericEnvClient(base_url=spider_server) as env:  # the raw wire observations
        await env.reset(question_id=question.id)
        through_openenv = [
            await env.step({"type": "call_tool", "tool_name": tool, "arguments": arguments})
            for tool, arguments in calls
        ]
    manager.shutdown()

    for mcp_result, openenv_result in zip(through_mcp, through_openenv, strict=True):
        result = openenv_result.observation["result"]
        assert comparable(result["content"][0]["text"], result["structured_content"]) == (
            comparable(mcp_result.content[0].text, mcp_result.structuredContent)
        )
        assert result["is_error"] == mcp_result.isError
        assert result["structured_content"]["reward"] == openenv_result.reward


def asked(catalog, start):
    """The question a reset's observation asks (the state does not name it: its id is a key
    into the public gold)."""
    data = start.observation.data
    candidates = catalog.questions(SPIDER_SPLIT, data["db_id"])
    return next(question for question in candidates if question.text == data["question"])


async def test_same_seed_gives_same_question_and_rewards(spider_server, spider_catalog):
    async def run(seed: int):
        async with SQLEnvClient(base_url=spider_server) as env:
            start = await env.reset(seed=seed)
            question = asked(spider_catalog, start)
            steps = await play_oracle(env, question, start.observation.data["budget"])
            return question.id, [served_record(s) for s in steps]

    first, again, other = await run(42), await run(42), await run(43)
    assert first == again
    assert first[0] != other[0]


async def test_eight_concurrent_sessions_are_isolated(spider_server, spider_catalog):
    outcomes: dict[int, tuple] = {}

    async def session(seed: int) -> None:
        async with SQLEnvClient(base_url=spider_server) as env:
            start = await env.reset(seed=seed)
            state = await env.state()
            question = asked(spider_catalog, start)
            steps = await play_oracle(env, question, start.observation.data["budget"])
            final_state = await env.state()
            outcomes[seed] = (state.episode_id, question.id, steps, final_state)

    async with anyio.create_task_group() as group:
        for seed in range(100, 108):
            group.start_soon(session, seed)

    assert len({episode_id for episode_id, *_ in outcomes.values()}) == 8
    for episode_id, question_id, steps, final_state in outcomes.values():
        assert steps[-1].reward == 1.0, question_id
        assert {s.observation.episode_id for s in steps} == {episode_id}
        assert final_state.episode_id == episode_id
        assert final_state.step_count == len(steps)


async def test_capacity_error_when_full(start_server):
    with start_server(max_episodes=2) as url:
        async with SQLEnvClient(base_url=url) as first, SQLEnvClient(base_url=url) as second:
            await first.reset(seed=1)
            await second.reset(seed=2)
            with pytest.raises(
                ServerError, match=f"the OpenEnv server at {url} .*CAPACITY_REACHED"
            ):
                async with SQLEnvClient(base_url=url) as third:
                    await third.reset(seed=3)
            assert (await first.query("SELECT 1")).observation.ok
        await wait_until_no_episodes(url)  # the two slots are freed when the sockets close
        async with SQLEnvClient(base_url=url) as later:
            assert not (await later.reset(seed=4)).done


async def test_a_session_that_cannot_start_is_refused_without_the_servers_objects(
    start_server, monkeypatch
):
    """No thread can start for a new session (the process at its limit): the client is told
    which environment failed, and nothing of the server's objects or their addresses."""
    with start_server() as url:
        start = threading.Thread.start

        def refused(thread: threading.Thread) -> None:
            if thread.name.startswith("ThreadPoolExecutor"):  # the sessions' executor
                raise RuntimeError("can't start new thread")
            start(thread)

        monkeypatch.setattr(threading.Thread, "start", refused)
        with pytest.raises(ServerError) as refusal:
            async with SQLEnvClient(base_url=url) as env:
                await env.reset(seed=1)
        monkeypatch.undo()
        async with SQLEnvClient(base_url=url) as env:
            assert not (await env.reset(seed=1)).done
    assert "Environment factory 'SQLExploreEnvironment' failed" in str(refusal.value)
    assert " object at 0x" not in str(refusal.value)


def test_remote_trl_instances_dropped_unclosed_end_their_sessions(start_server):
    """A trainer's rollouts on a server: instances garbage-collected without being closed
    close their connections (and their client threads), so their sessions do not pile up."""
    with start_server() as url:
        for seed in range(6):
            remote = RemoteSQLEnvTRL(url)
            assert remote.reset(seed=seed).startswith("Question: ")
            remote.describe("nothing")
        del remote
        gc.collect()
        deadline = time.monotonic() + 20
        while httpx.get(f"{url}/stats").json()["active"]:
            assert time.monotonic() < deadline, "dropped instances held their sessions"
            time.sleep(0.1)


def test_remote_trl_refuses_a_server_whose_rewards_it_would_sum_otherwise(start_server):
    """Under the potential profile an unanswered episode is refunded its exploration at the
    end, which only the server can book: remote, leaving an episode unanswered would pay."""
    with (
        start_server(reward_profile="potential") as url,
        RemoteSQLEnvTRL(url) as remote,
        pytest.raises(ServerError) as refusal,
    ):
        remote.reset(seed=1)
    assert "serves the 'potential' reward profile" in str(refusal.value)
    assert "--reward-profile shaped or sparse" in str(refusal.value)


def test_a_reset_the_server_refuses_raises_the_engines_error_as_in_process(
    spider_server, spider_settings
):
    """Remote, a reset naming no question raised a RuntimeError wrapping the server's text:
    a trainer catching the engine's errors would have had to parse it."""
    manager = open_manager(spider_settings)
    try:
        with pytest.raises(UnknownQuestionError) as in_process:
            SQLEnvTRL(manager).reset(question_id="nowhere:1")
    finally:
        manager.shutdown()
    with (
        RemoteSQLEnvTRL(spider_server) as remote,
        pytest.raises(UnknownQuestionError) as refused,
    ):
        remote.reset(question_id="nowhere:1")
    assert str(refused.value) == str(in_process.value)


def test_remote_trl_rewards_add_up_as_in_process(spider_server, spider_settings):
    """The engine rounds an episode's total at every step; summed unrounded, the remote total
    drifted from it (-0.049999999999999996 for -0.05 after these calls)."""
    calls = [
        ("describe", {"table": "singer"}),
        ("sample", {"table": "singer"}),
        ("query", {"sql": "SELECT 6"}),
        ("describe", {"table": "singer"}),
        ("describe", {"table": "nothing"}),
        ("query", {"sql": "SELECT 6"}),
        ("describe", {"table": "concert"}),
    ]
    manager = open_manager(spider_settings)
    local = SQLEnvTRL(manager)
    try:
        with RemoteSQLEnvTRL(spider_server) as remote:
            for environment in (local, remote):
                environment.reset(question_id=f"{SPIDER_SPLIT}:1")
            for tool, arguments in calls:
                for environment in (local, remote):
                    getattr(environment, tool)(**arguments)
            # Asked at the end, as TRL asks: in process, that ends the episode unanswered.
            assert remote.get_reward() == local.get_reward() == -0.05
    finally:
        manager.shutdown()


async def wait_until_no_episodes(url: str) -> None:
    async with httpx.AsyncClient(base_url=url) as http:
        deadline = time.monotonic() + 20
        while (await http.get("/stats")).json()["active"] != 0:
            assert time.monotonic() < deadline, "episodes were not closed"
            await anyio.sleep(0.1)


def test_a_remote_episode_lost_with_its_server_says_so_and_keeps_its_reward(start_server, caplog):
    """The server goes away mid-episode: the call fails to connect. The rollout reads that its
    episode is over, and nothing reaches the server started again at the same address (where
    the episode cannot be), until the next reset plays there."""
    with start_server() as url:
        remote = RemoteSQLEnvTRL(url)
        remote.reset(question_id=f"{SPIDER_SPLIT}:1")
        remote.describe(table="singer")
        reward = remote.get_reward()
    with caplog.at_level(logging.WARNING, logger="doors.trl.remote"):
        assert remote.describe(table="singer") == LOST
    said = (
        f"on {url} was lost with its connection (the OpenEnv server at {url} could not be reached"
    )
    assert said in caplog.text
    with start_server(port=urlsplit(url).port) as again:
        assert again == url
        assert remote.query(sql="SELECT 1") == LOST
        assert httpx.get(f"{url}/stats").json()["created"] == 0
        assert remote.get_reward() == reward == 0.01
        assert remote.reset(question_id=f"{SPIDER_SPLIT}:1").startswith("Question: ")
        assert remote.describe(table="singer").startswith("table singer: 6 rows")
        remote.__exit__()


def test_a_remote_episode_whose_client_reconnected_to_a_new_session_says_it_was_lost(
    start_server, caplog
):
    """The server restarts between two calls: the client reconnects to a new session without
    an error, and that session has no episode. The rollout reads that its episode is over,
    not the new session's "call reset first", which no tool can do."""
    with start_server() as url:
        remote = RemoteSQLEnvTRL(url)
        remote.reset(question_id=f"{SPIDER_SPLIT}:1")
        remote.describe(table="singer")
    with start_server(port=urlsplit(url).port), caplog.at_level(logging.WARNING):
        assert remote.describe(table="singer") == LOST
        assert "a new session answered 'Error: no episode is running" in caplog.text
        assert remote.sample(table="singer") == LOST
        assert remote.get_reward() == 0.01
        remote.__exit__()


async def test_idle_session_is_reaped(start_server):
    with start_server(idle_ttl_s=1.0) as url:
        async with SQLEnvClient(base_url=url) as idle:
            await idle.reset(seed=1)
            # OpenEnv's reaper looks every max(timeout / 4, 5 s) and closes the episode.
            await wait_until_no_episodes(url)
            stale = await idle.query("SELECT 1")
            assert stale.done and "session is closed" in stale.observation.error
            assert (await idle.reset(seed=1)).observation.data["error"] == "session_closed"
        async with SQLEnvClient(base_url=url) as fresh:
            assert not (await fresh.reset(seed=1)).done


async def test_generic_openenv_mcp_client_gets_tools_and_rewards(spider_server):
    async with MCPToolClient(base_url=spider_server) as env:
        tools = await env.list_tools()
        assert [tool.name for tool in tools] == [spec.name for spec in TOOLS]
        await env.reset(question_id=f"{SPIDER_SPLIT}:1")
        result = await env.step(CallToolAction(tool_name="query", arguments={"sql": "SELECT 6"}))
        assert result.reward == pytest.approx(0.02)
        assert result.observation.result["structured_content"]["data"]["rows"] == [[6]]
        called = await env.call_tool("answer", value="6")
        assert called["reward"] == 1.0 and called["done"]


def test_stateless_http_reset_closes_its_episode(spider_server):
    with httpx.Client(base_url=spider_server) as http:
        before = http.get("/stats").json()
        reset = http.post("/reset", json={"question_id": f"{SPIDER_SPLIT}:1"}).json()
        assert reset["observation"]["db_id"] == "concert_singer"
        after = http.get("/stats").json()
    assert after["created"] == before["created"] + 1
    assert after["closed"] == before["closed"] + 1


def test_the_web_page_when_off_says_how_to_turn_it_on(spider_server):
    reply = httpx.get(f"{spider_server}/web")
    assert reply.status_code == 404
    assert "start the server with --web" in reply.json()["detail"]


def test_the_server_tells_the_catalog_and_the_episodes_it_serves(start_server, spider_catalog):
    split = spider_catalog.splits[SPIDER_SPLIT]
    with start_server(max_steps=9, reward_profile="sparse") as url:
        assert httpx.get(f"{url}/catalog").json() == {
            "split": SPIDER_SPLIT,
            "questions": len(split.questions),
            "fingerprint": split.fingerprint,
            "max_steps": 9,
            "reward_profile": "sparse",
        }
