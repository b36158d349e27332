"""The verifiers door through verifiers' own eval loop: `vf-eval sqlenv-verifiers` with the null
harness (the model and the toolset's tools) against a scripted OpenAI-compatible endpoint
(`tests/llm_server.py`) that makes each question's script of calls, on Spider dev questions.

These tests run in the door's own environment (`.venv-verifiers`, which `make test` builds):
one eval plays every script below, each on a question of its own, and each rollout is compared
with the engine in process playing the same calls. A verifiers rollout stops once its episode
has ended, so the text of the ending call (and any call after it) is not shown to the model.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import uvicorn

from env_core.calls import drive
from env_core.contract import INSTRUCTIONS, chat_tools
from env_core.factory import open_manager
from env_core.hermes import ModelTurn, RawToolCall
from env_core.holder import EpisodeHolder
from env_core.oracle import oracle_calls
from evals.door_clients import DoorSpec, open_door
from tests.conformance.conformance_scripts import Script, all_scripts
from tests.conftest import SPIDER_DEV
from tests.llm_server import scripted_app

RUNAWAY = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
HOSTILE = (
    ("query", {"sql": "DROP TABLE singer"}),
    ("query", {"sql": RUNAWAY}),
    ("describe", {"table": "singer"}),
)
# Which of the conformance suite's 300 scripts (100 Oracle, 150 Random, 50 edge cases) the
# door plays: a rollout costs seconds of CPU here (verifiers starts a tool server and a chat
# program for each), so six Random ones and the four kinds of edge case.
CONFORMANCE = (*range(100, 250, 25), *range(250, 254))
# One eval of every script, on a machine whose two cores the other tests share.
pytestmark = pytest.mark.timeout(1800)


@dataclass(frozen=True)
class Played:
    """What a rollout showed and scored, or the engine in process gave for the same calls."""

    opening: str
    texts: tuple[str, ...]  # each call's text up to the episode's end, the ending one left out
    reward: float  # the episode's total, an unanswered one ended as the door ends it
    correct: bool


def play_in_process(holder: EpisodeHolder, script: Script) -> Played:
    episode = holder.start(question_id=script.question_id)
    texts = []
    for tool, arguments in script.calls:
        result = holder.call(tool, arguments)
        if result.done:
            break
        texts.append(result.text)
    holder.abandon()
    return Played(episode.start.text, tuple(texts), episode.total_reward, bool(episode.correct))


def shown_by(trace: dict) -> Played:
    messages = [node["message"] for node in trace["nodes"]]
    return Played(
        next(m["content"] for m in messages if m["role"] == "user"),
        tuple(m["content"] for m in messages if m["role"] == "tool"),
        trace["rewards"]["episode_reward"]["score"],
        trace["metrics"]["correct"] == 1.0,
    )


def model_turns(script: Script) -> list[ModelTurn]:
    return [
        ModelTurn("", [RawToolCall(f"call_{i}", tool, arguments)])
        for i, (tool, arguments) in enumerate(script.calls)
    ]


@dataclass
class Evaluation:
    scripts: dict[str, Script]  # by name
    expected: dict[str, Played]
    traces: dict[str, dict]  # each script's rollout
    requests: list[dict]  # every request the endpoint answered
    tool_servers_left: list[str]
    manager: object


def endpoint(scripts: dict[str, list[ModelTurn]], requests: list[dict]):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(scripted_app(scripts, "scripted", requests), log_level="warning")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{listener.getsockname()[1]}/v1"


def tool_servers() -> list[str]:
    """The command lines of the door's tool servers still running on this machine."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            command = cmdline.read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "sqlenv_verifiers.toolset" in command:
            found.append(command)
    return found


@pytest.fixture(scope="module")
def evaluation(spider_dir, tmp_path_factory) -> Evaluation:
    manager = open_manager(data_dir=str(spider_dir), split=SPIDER_DEV)
    questions = manager.catalog.questions(SPIDER_DEV)
    budget, rows = manager.settings.max_steps, manager.settings.max_rows
    holder = EpisodeHolder(manager, idle="")
    scripts = []
    for question in questions[:4]:
        holder.start(question_id=question.id)
        play = oracle_calls(question, budget, rows)
        made = drive(play, lambda call: holder.call(call.tool, call.arguments), budget)
        calls = tuple((call.tool, call.arguments) for call, _ in made)
        scripts.append(Script(f"oracle-{question.id}", question.id, calls))
    singers = next(q for q in questions[4:] if q.db_id == "concert_singer")
    scripts.append(Script("hostile", singers.id, HOSTILE))
    midway = (("drop_table", {"table": "singer"}), ("describe", {"table": "no_such"}))
    scripts.append(Script("midway", questions[-1].id, midway))
    spec = DoorSpec("inprocess", manager.settings)
    door = open_door(spec)
    suite = all_scripts(door, SPIDER_DEV, budget)
    conformance = [suite[index] for index in CONFORMANCE]
    door.close()
    for script in conformance:
        if all(script.question_id != s.question_id for s in scripts):
            scripts.append(replace(script, name=f"conformance-{script.name}"))
    expected = {script.name: play_in_process(holder, script) for script in scripts}
    holder.close("the scripts are played")

    by_opening = {expected[s.name].opening: model_turns(s) for s in scripts}
    requests: list[dict] = []
    server, thread, url = endpoint(by_opening, requests)
    out = tmp_path_factory.mktemp("vf-eval")
    bin_dir = Path(sys.executable).parent
    environment = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",  # the uv verifiers runs
        "SCRIPTED_ENDPOINT_KEY": "none",
    }
    command = [
        str(bin_dir / "vf-eval"),
        "sqlenv-verifiers",
        "--env.taskset.data-dir",
        str(spider_dir),
        "--env.taskset.split",
        SPIDER_DEV,
        "--select.include.ids",
        *[s.question_id for s in scripts],
        "--model",
        "scripted",
        "--client.base-url",
        url,
        "--client.api-key-var",
        "SCRIPTED_ENDPOINT_KEY",
        "--env.agent.harness.id",
        "null",
        "--env.agent.runtime.type",
        "subprocess",
        "--max-concurrent",
        "4",
        "--no-rich",
        "--no-push",
        "--output-dir",
        str(out),
    ]
    try:
        ran = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=1500)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    assert ran.returncode == 0, ran.stderr[-3000:]
    [traces_file] = out.glob("*/traces.jsonl")
    episodes = [json.loads(line) for line in traces_file.read_text().splitlines()]
    by_question = {e["task"]["data"]["question_id"]: e["traces"][0] for e in episodes}
    traces = {s.name: by_question[s.question_id] for s in scripts}
    yield Evaluation(
        {s.name: s for s in scripts}, expected, traces, requests, tool_servers(), manager
    )
    manager.shutdown()


def test_a_vf_eval_of_oracle_calls_scores_the_engines_rewards(evaluation):
    oracles = [name for name in evaluation.scripts if name.startswith("oracle-")]
    assert len(oracles) == 4
    for name in oracles:
        trace = evaluation.traces[name]
        assert trace["ok"] and trace["stop_condition"] == "answered", trace["errors"]
        assert shown_by(trace) == evaluation.expected[name]
        assert evaluation.expected[name].correct


def test_the_model_is_shown_the_contract(evaluation):
    first = evaluation.requests[0]
    system, user = first["messages"][:2]
    openings = {played.opening for played in evaluation.expected.values()}
    assert system == {"role": "system", "content": INSTRUCTIONS}
    assert user["role"] == "user" and user["content"] in openings
    specs = evaluation.manager.tools
    contract = [tool["function"] for tool in chat_tools(specs)]
    shown = [tool["function"] for tool in first["tools"]]
    assert [(t["name"], t["description"]) for t in shown] == [
        (t["name"], t["description"]) for t in contract
    ]
    assert [t["parameters"] for t in shown] == [spec.parameters for spec in specs]


def test_a_hostile_query_is_bounded_and_changes_nothing(evaluation):
    played = shown_by(evaluation.traces["hostile"])
    dropped, endless, described = played.texts
    assert dropped.startswith("Error:") and endless.startswith("Error:")
    assert len(endless) < 1_000
    assert "singer" in described and not described.startswith("Error:")
    assert played == evaluation.expected["hostile"]


def test_a_rollout_that_ends_midway_scores_the_engines_end_and_releases_its_episode(
    evaluation,
):
    trace = evaluation.traces["midway"]
    assert trace["ok"] and trace["stop_condition"] == "agent_completed", trace["errors"]
    played, expected = shown_by(trace), evaluation.expected["midway"]
    # verifiers' chat program answers a tool it does not list itself; the engine's refusal
    # spends nothing either.
    assert played.texts[0] == "error: unknown tool 'drop_table'"
    assert expected.texts[0].startswith("Error: unknown tool 'drop_table'")
    assert replace(played, texts=played.texts[1:]) == replace(expected, texts=expected.texts[1:])
    assert not played.correct
    assert evaluation.tool_servers_left == []


def outcomes(played: Played) -> list:
    """As the conformance table counts them: the opening and each call's text, the episode's
    reward and verdict with the last."""
    shown = [played.opening, *played.texts]
    return [*shown[:-1], (shown[-1], played.reward, played.correct)]


def test_the_conformance_scripts_play_alike(evaluation, capfd):
    """Prints a row of the conformance table (tests/conformance) for this door."""
    names = [name for name in evaluation.scripts if name.startswith("conformance-")]
    expected = [outcomes(evaluation.expected[name]) for name in names]
    got = [outcomes(shown_by(evaluation.traces[name])) for name in names]
    pairs = zip(expected, got, strict=True)
    identical = sum(a == b for e, g in pairs for a, b in zip(e, g, strict=False))
    compared = sum(len(e) for e in expected)
    with capfd.disabled():
        print(
            f"\n{'verifiers':<11}{len(names):>9}{compared - len(names):>7}{identical:>11}"
            "  text, episode reward (the calls up to the end of 9 Random and edge scripts)"
        )
    assert got == expected
