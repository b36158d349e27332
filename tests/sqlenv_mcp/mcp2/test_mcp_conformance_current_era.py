"""The conformance suite's row for an MCP client in the 2026-07-28 protocol: its 300 scripts
(tests/conformance) replayed through the mcp 2.x client over stdio, each call naming its episode,
give the engine's observations and rewards in process, compared as the suite compares the
other doors (text with the episode id masked, reward, done, structured result). It runs here
because the suite's environment has mcp 1.x, which does not speak this protocol."""

import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from evals.door_clients import open_door

sys.path.insert(0, str(Path(__file__).parents[2] / "conformance"))  # the suite's scripts
from conformance_scripts import (
    Outcome,
    all_scripts,
    comparable_data,
    differences,
    masked,
    replay_door,
)

pytestmark = pytest.mark.anyio


async def replay(client: Client, scripts) -> list[list[Outcome]]:
    episodes = []
    for script in scripts:
        start = await client.call_tool("start_episode", {"question_id": script.question_id})
        handle = {"episode_id": start.structured_content["episode_id"]}
        outcomes = [Outcome(start.content[0].text, 0.0, False, None)]
        for tool, arguments in script.calls:
            result = await client.call_tool(tool, {**arguments, **handle})
            shown = result.structured_content
            data = comparable_data(shown["data"], handle["episode_id"])
            text = masked(result.content[0].text, handle["episode_id"])
            outcomes.append(Outcome(text, shown["reward"], shown["done"], data))
        await client.call_tool("end_episode", handle)
        episodes.append(outcomes)
    return episodes


async def test_the_current_protocol_agrees_with_the_engine_on_300_scripted_episodes(
    dev_door_spec, tmp_path
):
    door = open_door(dev_door_spec)
    try:
        settings = dev_door_spec.settings
        scripts = all_scripts(door, settings.split, settings.max_steps)
        reference = replay_door(door, scripts)
    finally:
        door.close()
    assert len(scripts) == 300
    arguments = ["-m", "sqlenv_mcp", "--no-output-schemas", *dev_door_spec.server_arguments()]
    params = StdioServerParameters(
        command=sys.executable, args=arguments, env={"PATH": os.environ["PATH"]}
    )
    with (tmp_path / "stderr.log").open("w") as log:
        async with Client(stdio_client(params, errlog=log), mode="2026-07-28") as client:
            played = await replay(client, scripts)
    assert differences(reference, played, scripts, compare_data=True)[:3] == []
