"""The MCP server through the SDK's in-memory client: a real server, a real client session."""

import gc
import json
import shutil

import pytest
from sdk_client import connect

from env_core import contract
from env_core.answers import gold_as_json
from env_core.tools import TOOLS
from sqlenv_mcp.agent_tools import AgentToolServer
from sqlenv_mcp.episodes import (
    EPISODE_ID,
    MAX_EPISODES_PER_SESSION,
    Sessions,
    register_episode_tools,
)
from sqlenv_mcp.server import build_episode_server

pytestmark = pytest.mark.anyio
DEV = "dev_without_wta_1"


def text(result) -> str:
    return result.content[0].text


async def test_tools_match_the_engine_definitions(manager):
    async with connect(build_episode_server(manager)) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) == {"start_episode", "describe", "sample", "query", "answer", "end_episode"}
    assert not {"reset", "step", "state", "close"} & set(listed)
    episode_id = {"type": "string", "description": EPISODE_ID["episode_id"]["description"]}
    for spec in TOOLS:
        tool = listed[spec.name]
        assert tool.description == spec.description
        # The engine's schema as it is (the one OpenEnv and TRL list), with the door's own
        # optional parameter beside the tool's: no schema rebuilt from a signature.
        properties = {**spec.parameters["properties"], "episode_id": episode_id}
        assert tool.inputSchema == {**spec.parameters, "properties": properties}
        assert tool.annotations.readOnlyHint is spec.read_only
        assert tool.outputSchema["properties"].keys() >= {"ok", "reward", "done", "data"}
    assert listed["sample"].inputSchema["properties"]["n"]["maximum"] == 20
    assert listed["describe"].annotations.idempotentHint is True


async def test_full_episode_on_spider_dev_matches_the_engine(manager):
    question = manager.catalog.question(f"{DEV}:0")
    direct = manager.create(question_id=question.id)
    async with connect(build_episode_server(manager)) as client:
        start = await client.call_tool("start_episode", {"question_id": question.id})
        assert not start.isError
        assert start.structuredContent["question"] == "How many singers do we have?"
        assert text(start) == direct.start.text
        calls = [
            ("describe", {"table": "singer"}),
            ("sample", {"table": "singer", "n": 2}),
            ("query", {"sql": question.sql}),
            ("answer", {"value": gold_as_json(question.gold)}),
        ]
        for tool, arguments in calls:
            through_mcp = await client.call_tool(tool, arguments)
            engine = direct.call(tool, arguments)
            assert text(through_mcp) == engine.text
            structured = through_mcp.structuredContent
            assert (structured["reward"], structured["done"]) == (engine.reward, engine.done)
            data = json.loads(json.dumps(engine.data))
            if "elapsed_ms" in data:
                data["elapsed_ms"] = structured["data"]["elapsed_ms"]
            assert structured["data"] == data
        assert structured["data"] == {"correct": True}


async def test_expected_failures_are_tool_errors_with_guidance(manager):
    async with connect(build_episode_server(manager)) as client:
        before = await client.call_tool("query", {"sql": "SELECT 1"})
        assert before.isError and "call start_episode first" in text(before)
        await client.call_tool("start_episode", {"question_id": f"{DEV}:0"})
        cases = {
            ("describe", "singers"): "no such table: singers; tables are: concert, singer",
            ("query", "DELETE FROM singer"): "Only read-only SELECT statements run here",
            ("query", "SELECT nope FROM singer"): "no such column: nope; use describe(table)",
            ("query", "SELECT 1; SELECT 2"): "only one SQL statement per call",
        }
        for (tool, argument), expected in cases.items():
            key = "table" if tool == "describe" else "sql"
            result = await client.call_tool(tool, {key: argument})
            assert result.isError and expected in text(result), text(result)
        too_many = await client.call_tool("sample", {"table": "singer", "n": 50})
        assert too_many.isError
        assert "sample: n must be a whole number from 1 to 20" in text(too_many)
        unknown = await client.call_tool("describe", {"table": "singer", "episode_id": "nope"})
        assert unknown.isError and "no open episode 'nope'" in text(unknown)
        missing = await client.call_tool("query", {})
        assert missing.isError and "sql" in text(missing)
        await client.call_tool("answer", {"value": "6"})
        after = await client.call_tool("answer", {"value": "6"})
        assert after.isError and "has ended (was answered); start a new episode" in text(after)
        assert after.structuredContent["done"] is True
        assert after.structuredContent["data"]["error"] == "episode_finished"
        bad_start = await client.call_tool("start_episode", {"question_id": "dev:99999"})
        assert bad_start.isError and "no question 'dev:99999'" in text(bad_start)


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        (
            "describe",
            {"table": "singer", "rows": 3},
            "describe does not take 'rows'; it takes: table",
        ),
        (
            "sample",
            {"table": "singer", "n": "two"},
            "sample: n must be a whole number from 1 to 20",
        ),
        ("answer", {}, "answer needs value"),
    ],
)
async def test_argument_mistakes_are_the_engines_results(manager, tool, arguments, message):
    async with connect(build_episode_server(manager)) as client:
        await client.call_tool("start_episode", {"question_id": f"{DEV}:0"})
        result = await client.call_tool(tool, arguments)
        assert result.isError and result.content[0].text.startswith(f"Error: {message}\n")
        assert result.structuredContent["data"]["error"] == "invalid_argument"
        assert result.structuredContent["reward"] < 0  # a step spent, as through every door


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"seed": "x"}, "seed must be a whole number, 0 or more, not 'x'"),
        ({"level": 3}, "start_episode does not take 'level'; it takes: question_id, db_id, "),
        ({"keep_previous": "yes"}, "keep_previous must be true or false, not 'yes'"),
    ],
)
async def test_start_episode_mistakes_are_clear_and_structured(manager, arguments, message):
    async with connect(build_episode_server(manager)) as client:
        result = await client.call_tool("start_episode", arguments)
    assert result.isError and result.content[0].text.startswith(f"Error: {message}")
    assert result.structuredContent["error"]["error"] == "invalid_argument"


async def test_connections_are_isolated_and_closed_on_exit(manager):
    server = build_episode_server(manager)
    async with connect(server) as first, connect(server) as second:
        a = await first.call_tool("start_episode", {"question_id": f"{DEV}:0"})
        b = await second.call_tool("start_episode", {"question_id": f"{DEV}:1"})
        assert a.structuredContent["episode_id"] != b.structuredContent["episode_id"]
        await first.call_tool("answer", {"value": "6"})
        still_open = await second.call_tool("query", {"sql": "SELECT 1"})
        assert not still_open.isError and not still_open.structuredContent["done"]
        assert manager.stats().active == 2
    assert manager.stats().active == 0


async def test_episodes_belong_to_the_mcp_session_whatever_the_lifespan(manager):
    # Without a lifespan entered per connection (as in the mcp 2.x SDK), each connection still
    # has its own episodes, and they close once its session is gone.
    server = AgentToolServer("shared lifespan")
    register_episode_tools(server, Sessions(manager))
    async with connect(server) as first, connect(server) as second:
        a = await first.call_tool("start_episode", {"question_id": f"{DEV}:0"})
        await second.call_tool("start_episode", {"question_id": f"{DEV}:1"})
        assert manager.stats().active == 2
        mine = await first.call_tool("query", {"sql": "SELECT 1"})
        assert mine.structuredContent["episode_id"] == a.structuredContent["episode_id"]
    gc.collect()
    assert manager.stats().active == 0


async def test_a_new_episode_ends_the_connections_previous_one(manager):
    async with connect(build_episode_server(manager)) as client:
        first = await client.call_tool("start_episode", {"question_id": f"{DEV}:0"})
        await client.call_tool("start_episode", {"question_id": f"{DEV}:1"})
        assert manager.stats().active == 1
        old = await client.call_tool(
            "query", {"sql": "SELECT 1", "episode_id": first.structuredContent["episode_id"]}
        )
        assert old.isError and "no open episode" in text(old)
        assert old.structuredContent["done"]
        # A start that cannot be made ends nothing.
        await client.call_tool("start_episode", {"question_id": "dev:99999"})
        assert manager.stats().active == 1


async def test_several_episodes_on_one_connection_by_episode_id(manager):
    async with connect(build_episode_server(manager)) as client:
        first = await client.call_tool("start_episode", {"question_id": f"{DEV}:0"})
        second = await client.call_tool(
            "start_episode", {"question_id": f"{DEV}:1", "keep_previous": True}
        )
        first_id = first.structuredContent["episode_id"]
        answered = await client.call_tool("answer", {"value": "6", "episode_id": first_id})
        assert answered.structuredContent["data"] == {"correct": True}
        current = await client.call_tool("query", {"sql": "SELECT 1"})
        assert current.structuredContent["episode_id"] == second.structuredContent["episode_id"]
        ended = await client.call_tool("end_episode", {})
        assert ended.structuredContent == {
            "episode_id": second.structuredContent["episode_id"],
            "closed": True,
        }
        assert manager.stats().active == 1


async def test_one_connection_keeps_a_few_episodes_at_most(manager):
    keep = {"seed": 1, "keep_previous": True}
    async with connect(build_episode_server(manager)) as client:
        for _ in range(MAX_EPISODES_PER_SESSION):
            assert not (await client.call_tool("start_episode", keep)).isError
        refused = await client.call_tool("start_episode", keep)
        assert refused.isError
        assert f"this session has {MAX_EPISODES_PER_SESSION} episodes open" in text(refused)
        assert manager.stats().active == MAX_EPISODES_PER_SESSION
        # Finished episodes give their place back; a start without keep_previous ends them all.
        await client.call_tool("answer", {"value": "0"})
        assert not (await client.call_tool("start_episode", keep)).isError
        assert not (await client.call_tool("start_episode", {"seed": 1})).isError
        assert manager.stats().active == 1


async def test_resource_and_prompt(manager):
    async with connect(build_episode_server(manager)) as client:
        resources = (await client.list_resources()).resources
        assert [str(r.uri) for r in resources] == ["sqlenv://databases"]
        listing = json.loads((await client.read_resource("sqlenv://databases")).contents[0].text)
        assert listing["split"] == DEV and listing["databases"]["concert_singer"] > 10
        prompts = (await client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["solve_question"]
        prompt = await client.get_prompt("solve_question", {"question_id": f"{DEV}:3"})
        text = prompt.messages[0].content.text
        assert text.startswith(f"Call start_episode with question_id {DEV}:3.")
        assert text.endswith(contract.INSTRUCTIONS)


async def test_output_schemas_can_be_left_out(manager):
    server = build_episode_server(manager, output_schemas=False)
    async with connect(server) as client:
        tools = (await client.list_tools()).tools
        assert all(tool.outputSchema is None for tool in tools)
        start = await client.call_tool("start_episode", {"question_id": f"{DEV}:0"})
        assert start.structuredContent["db_id"] == "concert_singer"
        result = await client.call_tool("query", {"sql": "SELECT count(*) FROM singer"})
        assert result.structuredContent["data"]["rows"] == [[6]]


async def test_a_start_that_cannot_open_its_database_ends_nothing(spider_dir, tmp_path):
    from env_core.catalog import Catalog
    from env_core.manager import EpisodeManager
    from env_core.settings import Settings

    (tmp_path / "tables.json").symlink_to(spider_dir / "tables.json")
    for db in ("concert_singer", "pets_1"):
        shutil.copytree(spider_dir / "database" / db, tmp_path / "database" / db)
    questions = json.loads((spider_dir / f"{DEV}.json").read_text())
    kept = [q for q in questions if q["db_id"] in ("concert_singer", "pets_1")]
    (tmp_path / f"{DEV}.json").write_text(json.dumps(kept))
    manager = EpisodeManager(Catalog.load(tmp_path, [DEV]), Settings(split=DEV))
    try:
        async with connect(build_episode_server(manager)) as client:
            await client.call_tool("start_episode", {"db_id": "concert_singer"})
            shutil.rmtree(tmp_path / "database" / "pets_1")  # gone since the catalog read it
            refused = await client.call_tool("start_episode", {"db_id": "pets_1"})
            assert refused.isError
            assert "the database 'pets_1' cannot be opened right now" in text(refused)
            counted = await client.call_tool("query", {"sql": "SELECT count(*) FROM singer"})
            assert counted.structuredContent["data"]["rows"] == [[6]], text(counted)
    finally:
        manager.shutdown()


async def test_a_tool_added_the_fastmcp_way_is_listed_after_the_engines_and_called(manager):
    """The benchmarks' floor (benchmarks/mcp_floor_server.py) adds its no-op with @server.tool
    beside the tools the server declares itself."""
    server = build_episode_server(manager)

    @server.tool(description="Do nothing.")
    async def noop() -> str:
        return "nothing done"

    async with connect(server) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names[-2:] == ["end_episode", "noop"]
        assert text(await client.call_tool("noop", {})) == "nothing done"
        unknown = await client.call_tool("nope", {})
        assert unknown.isError and text(unknown) == "Unknown tool: nope"
