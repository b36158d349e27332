"""The same seed and policy give the same episodes, step for step, through every door."""

import contextlib
import sys
import threading
from dataclasses import replace

import psutil
import pytest

from env_core.errors import DataError
from env_core.settings import Settings
from evals import DoorSpec, OraclePolicy, RandomPolicy, evaluate, open_door
from evals.door_clients import mcp_door
from evals.plan import EpisodeTask
from evals.play import play_episode
from serving.local_server import LocalServer

EPISODES = 50
SEED = 11
SLOW_SQL = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 30000000) "
    "SELECT count(*) FROM c"
)


def play_both(spec) -> dict:
    door = open_door(spec)
    try:
        return {
            policy.name: evaluate(door, policy, EPISODES, SEED)
            for policy in (OraclePolicy(), RandomPolicy())
        }
    finally:
        door.close()


@pytest.fixture(scope="module")
def in_process(spec_for) -> dict:
    return play_both(spec_for("inprocess"))


def test_oracle_solves_every_episode_and_random_almost_none(in_process):
    oracle, random = in_process["oracle"].summary, in_process["random"].summary
    assert oracle.overall.success.successes == EPISODES
    assert oracle.answered == EPISODES and oracle.errors == {}
    assert random.overall.success.rate <= 0.1
    # Random makes valid calls: every tool, no errors, always an answer at the end.
    assert set(random.tool_use) == {"describe", "sample", "query", "answer"}
    assert random.errors == {} and random.answered == EPISODES


@pytest.mark.parametrize("kind", ["mcp-stdio", "mcp-http", "openenv"])
def test_every_door_gives_the_in_process_records(kind, spec_for, in_process):
    through_door = play_both(spec_for(kind))
    for name, expected in in_process.items():
        assert through_door[name].records == expected.records
        assert through_door[name].summary == expected.summary


SERVERS = {
    "mcp-http": (["sqlenv_mcp", "--transport", "http"], "/health"),
    "openenv": (["doors.commands"], "/health"),
}


@pytest.mark.parametrize("kind", SERVERS)
def test_a_server_on_other_data_is_refused_clearly(kind, spec_for, cache_dir):
    module, health = SERVERS[kind]
    demo = LocalServer([sys.executable, "-m", *module], health)
    try:
        with pytest.raises(DataError, match="serves other questions than this evaluation's"):
            open_door(spec_for(kind).at(demo.url))
        same_data = DoorSpec(kind, Settings(cache_dir=str(cache_dir)), demo.url)
        open_door(same_data).close()
    finally:
        demo.stop()


@pytest.mark.parametrize("kind", SERVERS)
def test_an_episode_lost_with_its_server_stops_the_run_rather_than_score_it(kind, spec_for):
    """The server restarts mid-episode. Through OpenEnv the client reconnects to a new
    session, which refuses the call as having no episode: recorded, that refusal would end the
    episode unanswered. Through MCP the SDK raised its own error, which the command line
    showed as a traceback. Either way the door now says the episode was lost."""
    spec = spec_for(kind)
    module, health = SERVERS[kind]
    command = [sys.executable, "-m", *module, *spec.server_arguments()]
    server = LocalServer(command, health)
    door = open_door(spec.at(server.url))
    try:
        start = door.start(f"{spec.settings.split}:1")
        assert door.step(start.episode_id, "describe", {"table": "singer"}).ok
        server.stop()
        server = LocalServer(command, health, port=server.port)
        with pytest.raises(ConnectionError, match="was lost"):
            door.step(start.episode_id, "describe", {"table": "singer"})
    finally:
        door.close()
        server.stop()


@pytest.mark.parametrize("kind", ["mcp-stdio", "mcp-http"])
def test_a_stuck_mcp_server_fails_the_call_soon_with_a_clear_error(kind, spec_for, monkeypatch):
    """The SDK's client waited for an answer forever over stdio, and 300 s over HTTP."""
    monkeypatch.setattr(mcp_door, "REPLY_MARGIN_S", 2.0)
    door = open_door(spec_for(kind))
    try:
        start = door.start("dev_without_wta_1:1")
        server = newest_mcp_server()
        server.suspend()
        try:
            with pytest.raises(ConnectionError, match="did not answer within 4 s"):
                door.step(start.episode_id, "describe", {"table": start.tables[0]})
        finally:
            server.resume()
    finally:
        door.close()


def newest_mcp_server() -> psutil.Process:
    """The MCP server this process started last (earlier ones may still be ending)."""
    servers = []
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # ended meanwhile
            if "sqlenv_mcp" in process.cmdline() and process.status() != psutil.STATUS_ZOMBIE:
                servers.append(process)
    return max(servers, key=psutil.Process.create_time)


def test_an_openenv_server_gone_mid_episode_stops_the_door_with_a_clear_error(spec_for):
    """The door raised the socket library's ConnectionClosedError, which `sqlenv eval` showed
    as a traceback rather than the reason."""
    door = open_door(spec_for("openenv"))
    try:
        start = door.start("dev_without_wta_1:1")
        threading.Timer(0.5, door._server.process.kill).start()  # while the query runs
        with pytest.raises(ConnectionError, match=f"and episode {start.episode_id} with it"):
            door.step(start.episode_id, "query", {"sql": SLOW_SQL})
    finally:
        door.close()


def test_the_oracle_reads_a_long_answer_by_the_row_limit_in_force(spec_for, spider_catalog):
    """With --max-rows 10, a gold of 11 to 20 rows is read in two pages of 10, through a real
    server, and answered correctly."""
    spec = spec_for("mcp-stdio")
    spec = replace(spec, settings=spec.settings.replace(max_rows=10))
    long_golds = [
        question.id
        for question in spider_catalog.questions(spec.settings.split)
        if 10 < len(question.gold.rows) <= 20
    ][:3]
    door = open_door(spec)
    try:
        records = [
            play_episode(door, OraclePolicy(), EpisodeTask(index, question_id), SEED)
            for index, question_id in enumerate(long_golds)
        ]
    finally:
        door.close()
    assert len(records) == 3
    for record in records:
        assert record.correct
        queries = [step.observation for step in record.steps if step.tool == "query"]
        assert len(queries) == 2 and not any("more exist" in text for text in queries)
