"""The project's Dockerfile, built unchanged and run: the OpenEnv server as a Hugging Face Space
runs it and the MCP server from the same image, both serving Spider mounted read-only, checked
through their published ports with the typed client, a browser and the MCP Inspector.

`make image-test` runs this module alone. Docker comes from scripts/docker-stand-in-base.sh,
which also stands the base image in from Debian packages where no registry can be reached.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest
from adversarial import snapshot
from docker_host import REPOSITORY, Container, docker, docker_daemon
from mcp_inspector import EPISODE_TOOLS, call_tool, http, list_tools, require_inspector
from web_player import browser_page, play_gold_episode

from doors.trl import SQLEnvTRL
from doors.trl.remote import RemoteSQLEnvTRL
from env_core.answers import gold_as_json
from env_core.manager import EpisodeManager
from evals.door_clients import InProcessClient, open_door
from evals.evaluate import evaluate
from evals.policies import OraclePolicy

IMAGE = "sqlenv:test"
SPLIT = "dev_without_wta_1"
SPIDER = "/data/spider"
QUESTION = f"{SPLIT}:0"  # How many singers do we have? (concert_singer)


@pytest.fixture(scope="module")
def image(tmp_path_factory, say) -> Iterator[str]:
    with docker_daemon(tmp_path_factory.mktemp("docker") / "dockerd.pid"):
        started = time.monotonic()
        docker("build", "--network", "host", "--tag", IMAGE, str(REPOSITORY), timeout_s=1800)
        seconds = time.monotonic() - started
        size = int(docker("image", "inspect", "--format", "{{.Size}}", IMAGE))
        say(f"\n{IMAGE}: built in {seconds:.0f} s; image size {size / 1e6:.0f} MB")
        yield IMAGE


@pytest.fixture(scope="module")
def spider_before(spider_dir):
    return snapshot(spider_dir)


@pytest.fixture(scope="module")
def containers(image, spider_dir, spider_before) -> Iterator[dict[str, Container]]:
    data = ["--volume", f"{spider_dir}:{SPIDER}:ro", "--env", f"SQLENV_DATA_DIR={SPIDER}"]
    mcp_command = ("sqlenv-mcp", "--transport", "http", "--host", "0.0.0.0", "--port", "8000")
    started: list[Container] = []
    try:
        # The image's own command, with the web page on, as `openenv push` configures a Space.
        web = ["--env", "ENABLE_WEB_INTERFACE=true", "--env", f"SQLENV_SPLIT={SPLIT}"]
        started.append(Container.run(image, *data, *web))
        started.append(Container.run(image, *data, command=(*mcp_command, "--split", SPLIT)))
        openenv, mcp = started
        openenv.wait_until_healthy("/health")
        mcp.wait_until_healthy("/health")
        yield {"openenv": openenv, "mcp": mcp}
    finally:
        for container in started:
            container.stop()


@pytest.fixture(scope="module")
def openenv(containers) -> Container:
    return containers["openenv"]


def test_health(openenv):
    assert httpx.get(f"{openenv.url}/health", timeout=10).json() == {"status": "healthy"}


def test_docs_list_reset_step_the_websocket_and_the_action_schema(openenv):
    docs = httpx.get(f"{openenv.url}/docs", timeout=10)
    assert docs.status_code == 200 and "/openapi.json" in docs.text
    document = httpx.get(f"{openenv.url}/openapi.json", timeout=10).json()
    assert {"/reset", "/step", "/ws"} <= set(document["paths"])
    action = document["components"]["schemas"]["CallToolAction"]
    assert {"tool_name", "arguments"} <= set(action["properties"])


def test_typed_client_episodes_over_the_websocket_get_the_engines_rewards(openenv, dev_door_spec):
    spec = replace(dev_door_spec, kind="openenv", url=openenv.url)
    served = evaluate(open_door(spec), OraclePolicy(), 3, seed=0).records
    local = evaluate(InProcessClient(spec), OraclePolicy(), 3, seed=0).records
    assert all(record.correct for record in served)
    assert [(r.question_id, r.total_reward) for r in served] == [
        (r.question_id, r.total_reward) for r in local
    ]


def test_trl_environment_pointed_at_the_container_plays_as_in_process(openenv, spider_catalog):
    question = spider_catalog.question(QUESTION)
    manager = EpisodeManager(spider_catalog)
    played = []
    with RemoteSQLEnvTRL(openenv.url) as remote:
        for environment in (SQLEnvTRL(manager), remote):
            texts = [
                environment.reset(question_id=QUESTION),
                environment.describe("singer"),
                environment.query(question.sql),
                environment.answer(gold_as_json(question.gold)),
            ]
            played.append((texts, environment.get_reward()))
    manager.shutdown()
    in_process, hosted = played
    assert hosted == in_process
    assert hosted[0][-1] == "Correct. The episode is over."


def test_an_episode_on_the_web_page(openenv, spider_catalog):
    with browser_page(f"{openenv.url}/web/") as page:
        play_gold_episode(page, spider_catalog, QUESTION, "singer")


def test_the_mcp_server_from_the_same_image_with_the_inspector(containers):
    inspector, target = require_inspector(), http(containers["mcp"].url)
    assert list_tools(inspector, target) == EPISODE_TOOLS
    started = call_tool(inspector, target, "start_episode", f"question_id={QUESTION}")
    assert started["content"][0]["text"].startswith("Question: How many singers do we have?")
    assert started["structuredContent"]["db_id"] == "concert_singer"


INSTALLED_COMMANDS = """\
import json
from importlib.metadata import distribution
points = distribution("sqlenv-mcp").entry_points
print(json.dumps({group: sorted(p.name for p in points if p.group == group)
                  for group in ("console_scripts", "sqlenv.commands")}))
"""


def test_every_console_script_answers_help_and_sqlenv_plays(openenv):
    installed = json.loads(openenv.exec("python", "-c", INSTALLED_COMMANDS).stdout)
    assert installed["console_scripts"] == ["sqlenv", "sqlenv-mcp", "sqlenv-openenv"]
    commands = [[script, "--help"] for script in installed["console_scripts"]]
    commands += [["sqlenv", command, "--help"] for command in installed["sqlenv.commands"]]
    for command in commands:
        answered = openenv.exec(*command)
        assert answered.returncode == 0 and answered.stdout.startswith("usage: "), answered

    played = openenv.exec("sqlenv", "play", "--split", SPLIT, "--seed", "3")
    assert played.returncode == 0, played.stderr
    assert played.stdout.rstrip().endswith("; correct")
    # The image's working folder belongs to root: the run goes to a fresh temporary folder.
    evaluation = f"sqlenv eval --policy oracle --split {SPLIT} --episodes 2 --no-progress"
    evaluated = openenv.exec("sh", "-c", f'{evaluation} --out "$(mktemp -d)/run"')
    assert evaluated.returncode == 0, evaluated.stderr


def test_runs_as_uid_1000_with_spider_mounted_read_only(containers):
    for container in containers.values():
        processes = docker("top", container.id, "-eo", "pid,uid,args").splitlines()[1:]
        assert processes and all(line.split()[1] == "1000" for line in processes), processes
        (mount,) = json.loads(docker("inspect", "--format", "{{json .Mounts}}", container.id))
        assert mount["Destination"] == SPIDER and mount["RW"] is False
        refused = container.exec("touch", f"{SPIDER}/written-by-the-container")
        assert "Read-only file system" in refused.stderr


def test_the_containers_wrote_nothing_into_the_mounted_data(containers, spider_dir, spider_before):
    for container in containers.values():
        container.stop()
    assert snapshot(spider_dir) == spider_before
