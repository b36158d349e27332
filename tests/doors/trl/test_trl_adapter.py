"""SQLEnvTRL as TRL sees it: its tools and their schemas, and parity with the engine."""

from __future__ import annotations

import pytest
from transformers.utils import get_json_schema

from doors.trl import SQLEnvTRL, environment_factory, episode_reward, tool_methods
from env_core.calls import ToolCall, drive
from env_core.executor_limits import ExecutorLimits
from env_core.manager import EpisodeManager
from env_core.oracle import oracle_calls
from env_core.settings import Settings
from env_core.tools import TOOLS, TOOLS_BY_NAME


def test_trl_exposes_exactly_the_four_tools_in_alphabetical_order(spider_manager):
    environment = environment_factory(spider_manager)()
    names = [method.__name__ for method in tool_methods(environment)]
    assert names == ["answer", "describe", "query", "sample"]


@pytest.mark.parametrize("spec", TOOLS, ids=lambda spec: spec.name)
def test_tool_schema_matches_the_engine_tool(spider_manager, spec):
    method = getattr(SQLEnvTRL(spider_manager), spec.name)
    function = get_json_schema(method)["function"]
    assert function["name"] == spec.name
    assert function["description"] == spec.description
    parameters = function["parameters"]
    assert set(parameters["required"]) == set(spec.parameters["required"])
    assert parameters["properties"].keys() == spec.parameters["properties"].keys()
    for name, engine_property in spec.parameters["properties"].items():
        assert parameters["properties"][name]["type"] == engine_property["type"]
        assert parameters["properties"][name]["description"] == engine_property["description"]


def _mixed_calls(question, budget):
    """Every kind of call: a sample, fixable mistakes and a repeat, then the oracle's calls."""
    oracle = oracle_calls(question, budget - 4, Settings.max_rows)
    first = next(oracle)
    table = first.arguments["table"] if first.tool == "describe" else "no_such_table"
    yield ToolCall("sample", {"table": table, "n": 2})
    yield ToolCall("describe", {"table": "no_such_table"})
    yield ToolCall("query", {"sql": "SELEC 1"})
    yield ToolCall("sample", {"table": table, "n": 2})
    result = yield first
    yield from _forward(oracle, result)


def _forward(player, result):
    """The rest of a started player's calls."""
    try:
        call = player.send(result)
        while True:
            call = player.send((yield call))
    except StopIteration:
        return


def test_same_episode_through_trl_and_engine_gives_same_text_and_rewards(
    spider_manager, spider_catalog
):
    environment = SQLEnvTRL(spider_manager)
    for question in spider_catalog.questions("dev_without_wta_1")[:40]:
        trl_opening = environment.reset(question_id=question.id, prompt=[], db_id=question.db_id)
        direct = spider_manager.create(question_id=question.id)
        assert trl_opening == direct.start.text

        def both(call, direct=direct):
            engine_result = spider_manager.step(direct.episode_id, call.tool, call.arguments)
            assert getattr(environment, call.tool)(**call.arguments) == engine_result.text
            assert environment.episode.total_reward == direct.total_reward
            return engine_result

        drive(_mixed_calls(question, direct.budget_left), both, direct.budget_left)
        assert direct.correct is True
        assert environment.get_reward() == direct.total_reward
        assert episode_reward([environment]) == [direct.total_reward]
        spider_manager.close(direct.episode_id)


def test_an_unanswered_rollout_is_scored_as_a_wrong_answer(spider_manager):
    from env_core.manager import EpisodeManager
    from env_core.settings import Settings

    config = Settings(split="dev_without_wta_1", reward_profile="potential")
    environment = SQLEnvTRL(EpisodeManager(spider_manager.catalog, config))
    environment.reset(question_id="dev_without_wta_1:0")
    environment.describe("singer")
    assert environment.episode.total_reward == 0.02
    assert environment.get_reward() == 0.0  # the exploration bonus is paid back
    assert environment.episode.done and environment.get_reward() == 0.0


def test_calls_after_the_answer_are_error_text_and_reset_starts_afresh(spider_manager):
    environment = SQLEnvTRL(spider_manager)
    assert environment.get_reward() == 0.0
    environment.reset(question_id="dev_without_wta_1:0")
    first = environment.episode
    environment.answer("42")
    assert environment.query("SELECT 1").startswith("Error: episode ")
    assert "has ended (was answered)" in environment.query("SELECT 1")
    environment.reset(question_id="dev_without_wta_1:1")
    assert environment.episode is not first
    assert environment.episode.steps_used == 0
    assert environment.get_reward() == 0.0
    assert spider_manager.stats().active == 1  # the first episode was closed


def test_wrong_or_missing_arguments_get_the_engines_error_and_spend_the_step(spider_manager):
    """TRL calls `tool(**arguments)` with what the model wrote; a TypeError would reach the
    model as TRL's own text and cost nothing, where every other door charges a step."""
    environment = SQLEnvTRL(spider_manager)
    environment.reset(question_id="dev_without_wta_1:0")
    assert environment.describe(name="singer").startswith(
        "Error: describe does not take 'name'; it takes: table"
    )
    assert environment.query().startswith("Error: query needs sql")
    assert environment.sample("singer", n=50).startswith("Error: sample: n must be")
    assert environment.sample(table="singer", n=2, extra=1).startswith("Error: sample does not")
    assert environment.query(**{"self": 1, "sql": "SELECT 1"}).startswith("Error: query does not")
    assert environment.episode.steps_used == 5
    assert TOOLS_BY_NAME["sample"].parameters["properties"]["n"]["maximum"] == 20
    assert environment.sample("singer", 2).startswith("Singer_ID")
    with pytest.raises(TypeError, match="at most 2 positional"):
        environment.sample("singer", 2, 3)


def test_the_tools_are_described_under_the_managers_row_limits(spider_manager):
    limits = ExecutorLimits(max_rows=7, max_sample_rows=9)
    manager = EpisodeManager(spider_manager.catalog, spider_manager.settings, limits=limits)
    environment = environment_factory(manager)()
    described = {m.__name__: get_json_schema(m)["function"] for m in tool_methods(environment)}
    assert "at most 7 rows" in described["query"]["description"]
    assert "(1 to 9)" in described["sample"]["parameters"]["properties"]["n"]["description"]
    environment.reset(question_id="dev_without_wta_1:0")
    assert environment.query("SELECT 1").startswith("1\n1\n")
    with pytest.raises(ValueError, match="environment_factory"):
        SQLEnvTRL(manager)
    assert "at most 20 rows" in get_json_schema(SQLEnvTRL.query)["function"]["description"]
    manager.shutdown()


def test_the_bare_class_serves_the_demo_when_no_data_dir_is_set(monkeypatch, cache_dir):
    from env_core import factory

    monkeypatch.delenv("SQLENV_DATA_DIR", raising=False)
    monkeypatch.setenv("SQLENV_CACHE_DIR", str(cache_dir))
    factory._shared.cache_clear()
    try:
        opening = SQLEnvTRL().reset(seed=1)  # what GRPOTrainer(environment_factory=SQLEnvTRL) makes
        assert "Database: " in opening
    finally:
        factory._shared.cache_clear()
