"""SQLExploreEnvironment in process, on the demo data: both step paths, errors, state, manifest."""

from __future__ import annotations

import importlib
from pathlib import Path

import anyio
import pytest
import yaml
from openenv.core.env_server.mcp_types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ToolErrorType,
)

from doors.openenv.client import SQLAction
from doors.openenv.environment import SQLExploreEnvironment
from env_core.manager import EpisodeManager
from env_core.rewards import PROFILES
from env_core.settings import Settings
from env_core.tools import TOOLS

REPOSITORY = Path(__file__).resolve().parents[3]
BOOKS_BY_GENRE = "SELECT genre FROM books GROUP BY genre ORDER BY count(*) DESC LIMIT 1"


@pytest.fixture
def manager(demo_catalog):
    manager = EpisodeManager(demo_catalog, Settings(max_episodes=4))
    yield manager
    manager.shutdown()


@pytest.fixture
def env(manager):
    env = SQLExploreEnvironment(manager)
    yield env
    env.close()


def call(tool: str, **arguments) -> CallToolAction:
    return CallToolAction(tool_name=tool, arguments=arguments)


def test_sync_step_sets_reward_and_done(env):
    start = env.reset(question_id="dev:15")
    assert start.db_id == "city_library" and start.budget == 15
    described = env.step(call("describe", table="books"))
    assert isinstance(described, CallToolObservation) and described.error is None
    assert described.reward == pytest.approx(0.01) and not described.done
    assert described.result["content"][0]["text"].startswith("table books: 32 rows")
    assert described.result["structured_content"]["data"]["table"] == "books"
    answered = env.step(call("answer", value='[["Fiction"]]'))
    assert answered.reward == 1.0 and answered.done
    assert answered.metadata["total_reward"] == pytest.approx(1.01)


def test_async_step_sets_reward_and_done(env):
    async def play():
        await env.reset_async(question_id="dev:15")
        queried = await env.step_async(call("query", sql=BOOKS_BY_GENRE))
        answered = await env.step_async(call("answer", value="Fiction"))
        return queried, answered

    queried, answered = anyio.run(play)
    assert queried.reward == pytest.approx(0.02) and not queried.done
    assert queried.result["structured_content"]["data"]["rows"] == [["Fiction"]]
    assert answered.reward == 1.0 and answered.done


def test_tool_list_is_the_engine_definition(env):
    listed = env.step(ListToolsAction())
    assert [tool.model_dump() for tool in listed.tools] == [
        {"name": s.name, "description": s.description, "input_schema": s.parameters} for s in TOOLS
    ]


def test_calls_the_episode_cannot_take_are_errors_without_a_step(env):
    before_reset = env.step(call("query", sql="SELECT 1"))
    assert before_reset.error.error_type == ToolErrorType.EXECUTION_ERROR
    assert before_reset.error.message == "no episode is running: call reset first"
    assert before_reset.done and before_reset.reward == 0.0

    env.reset(question_id="dev:15")
    unknown = env.step(call("drop", table="books"))
    assert unknown.error.error_type == ToolErrorType.TOOL_NOT_FOUND and not unknown.done
    assert env.state.step_count == 0

    mistake = env.step(call("sample", table="books", n=99))
    assert mistake.error is None and mistake.result["is_error"]
    assert mistake.result["structured_content"]["data"]["error"] == "invalid_argument"
    assert env.state.step_count == 1


def test_reset_errors_are_observations(env, manager):
    unknown = env.reset(question_id="dev:99999")
    assert unknown.done and unknown.error["error"] == "unknown_question"
    assert unknown.text == f"Error: {unknown.error['message']}"
    assert env.reset(level=3).error["message"].startswith("reset does not take 'level';")

    others = [SQLExploreEnvironment(manager) for _ in range(4)]
    for other in others:
        other.reset(seed=1)
    full = env.reset(seed=1)
    assert full.error["error"] == "capacity"
    for other in others:
        other.close()


def test_reset_replaces_the_episode_and_close_ends_it(env, manager):
    first = env.reset(seed=1).episode_id
    second = env.reset(seed=2).episode_id
    assert first != second and manager.stats().active == 1
    env.close()
    assert manager.stats().active == 0
    assert env.reset(seed=3).error["error"] == "session_closed"
    assert "session is closed" in env.step(call("query", sql="SELECT 1")).error.message


def test_state_tells_the_episode_but_never_the_gold(env, demo_catalog):
    env.reset(question_id="dev:15")
    env.step(call("describe", table="books"))
    state = env.state
    assert (state.step_count, state.budget_left, state.db_id) == (1, 14, "city_library")
    assert state.question == demo_catalog.question("dev:15").text
    dumped = state.model_dump_json()
    question = demo_catalog.question("dev:15")
    assert question.sql not in dumped and "Fiction" not in dumped and "gold" not in dumped


def test_classic_actions_become_tool_calls():
    assert SQLAction(action_type="QUERY", argument="SELECT 1").to_call() == call(
        "query", sql="SELECT 1"
    )
    assert SQLAction(action_type="SAMPLE", argument="books").to_call() == call(
        "sample", table="books"
    )
    assert SQLAction(action_type="ANSWER", argument="42").to_call() == call("answer", value="42")


def test_manifest_reward_range_covers_every_profile():
    manifest = yaml.safe_load((REPOSITORY / "openenv.yaml").read_text())
    low, high = manifest["validation"]["reward"]["range"]
    for config in PROFILES.values():
        # A step earns at most its clipped shaping, or the answer's worth; the final refund
        # of the potential profile takes back at most the episode's shaping bound.
        assert low <= config.wrong - max(config.max_step_shaping, config.max_episode_shaping)
        assert high >= max(config.correct, config.wrong + config.max_step_shaping)


def test_server_settings_from_environment_variables():
    assert Settings.from_environment({}) == Settings()
    settings = Settings.from_environment(
        {"SQLENV_MAX_EPISODES": "512", "SQLENV_IDLE_TTL": "60", "SQLENV_SPLIT": "train"}
    )
    assert (settings.max_episodes, settings.idle_ttl_s, settings.split) == (512, 60, "train")


def test_the_asgi_app_module_builds_from_environment_variables(monkeypatch, cache_dir):
    monkeypatch.delenv("SQLENV_DATA_DIR", raising=False)
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("ENABLE_WEB_INTERFACE", "false")
    app = importlib.import_module("doors.openenv.app").app
    paths = {route.path for route in app.routes}
    assert {"/ws", "/reset", "/step", "/state", "/mcp", "/schema", "/stats"} <= paths
