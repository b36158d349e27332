"""Every door can name the dataset an episode draws from, where several are served: the MCP
`start_episode`, the OpenEnv reset, the TRL reset (a dataset row's column) and the green agent's
request; an unknown dataset is the engine's error, naming the datasets there are."""

import json
import os
from pathlib import Path

import pytest
from mcp.shared.memory import create_connected_server_and_client_session as connect

from doors.openenv.environment import SQLExploreEnvironment
from doors.trl import SQLEnvTRL
from env_core.factory import open_manager
from env_core.settings import Settings
from evals.green.assessor import Assessor
from evals.green.request import RequestError, parse_request
from sqlenv_mcp.assessment import Seats
from sqlenv_mcp.server import build_episode_server
from tests.env_core.test_datasets import shared_data, write_fixture

UNKNOWN = "no dataset 'birds'; loaded datasets: "


@pytest.fixture(scope="module")
def mixed_settings(spider_dir, cache_dir, tmp_path_factory) -> Settings:
    bird = write_fixture("bird", tmp_path_factory.mktemp("data") / "bird")
    return Settings(
        data_dir=os.pathsep.join([f"{shared_data('spider-dk')}@Spider-DK", str(bird)]),
        databases_dir=str(Path(spider_dir) / "database"),
        cache_dir=str(cache_dir),
    )


@pytest.fixture(scope="module")
def manager(mixed_settings):
    manager = open_manager(mixed_settings)
    yield manager
    manager.shutdown()


def databases_of(manager, dataset: str) -> set[str]:
    return {question.db_id for question in manager.catalog.catalogs[dataset].questions()}


@pytest.mark.anyio
async def test_mcp_start_episode_names_a_dataset(manager):
    async with connect(build_episode_server(manager)) as client:
        started = []
        for seed in range(6):
            arguments = {"dataset": "bird", "seed": seed, "keep_previous": True}
            result = await client.call_tool("start_episode", arguments)
            assert not result.isError, result.content[0].text
            started.append(result.structuredContent["db_id"])
        assert set(started) <= databases_of(manager, "bird")
        refused = await client.call_tool("start_episode", {"dataset": "birds"})
        assert refused.isError and UNKNOWN in refused.content[0].text


def test_the_openenv_reset_names_a_dataset(manager):
    environment = SQLExploreEnvironment(manager)
    try:
        opened = environment.reset(dataset="spider-dk", seed=3)
        assert opened.error is None
        assert opened.db_id in databases_of(manager, "spider-dk")
        refused = environment.reset(dataset="birds")
        assert UNKNOWN in refused.error["message"]
        assert environment.state.episode_id == opened.episode_id  # the episode plays on
    finally:
        environment.close()


def test_a_trl_row_names_its_dataset(manager):
    environment = SQLEnvTRL(manager)
    environment.reset(dataset="bird", seed=1, prompt=[{"role": "user", "content": "…"}])
    assert environment.episode.question.dataset == "bird"
    environment.get_reward()


def test_an_assessment_request_names_a_dataset(mixed_settings):
    assessor = Assessor(mixed_settings, Seats(), "http://127.0.0.1:9009")
    request = {"participants": {"agent": "http://127.0.0.1:9019"}}
    plan = assessor.plan(parse_request({**request, "config": {"dataset": "bird"}}))
    assert len(plan.tasks) == 4
    assert {task.question_id.split("/")[0] for task in plan.tasks} == {"bird"}
    with pytest.raises(RequestError, match=f"config.dataset: {UNKNOWN}"):
        assessor.plan(parse_request(json.dumps({**request, "config": {"dataset": "birds"}})))
