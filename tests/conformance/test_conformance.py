"""300 fixed episodes replayed through the doors give identical observations and rewards.

The doors: the engine in process, MCP over stdio, MCP over streamable HTTP, OpenEnv over its
WebSocket, `SQLEnvTRL`, SkyRL's text environment (each call written as the Hermes tool call a
chat template emits, the model's turn skyrl-gym's `step` reads) and Inspect AI. For every call
the suite compares the text an agent reads (with the episode id masked, as ids differ by
door), the step reward, the done flag and the structured result (without the measured
`elapsed_ms`; episode ids masked in it too), calls the episode does not take (after its end)
included. SQLEnvTRL returns text only, so its structured
result is not compared. Inspect AI's door shows text only and the episode's total reward, ends
a sample with its episode and refuses calls off a tool's schema itself: its row compares the
scripts that end their episode with calls Inspect makes, up to the end. The table of the run
that `docs/performance.md` shows must be this run's: a change to the scripts or the doors is
recorded again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import skyrl_gym
from conformance_scripts import (
    Outcome,
    Script,
    all_scripts,
    comparable_data,
    differences,
    masked,
    replay_door,
)
from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model

import doors.skyrl
from doors.inspect_task.task import VERDICT, engine_verdict, play_episode
from doors.trl import SQLEnvTRL
from env_core.factory import open_manager
from evals.door_clients import DoorClient, open_door
from training.datasets import skyrl_row

DOORS = ("inprocess", "mcp-stdio", "mcp-http", "openenv", "trl", "skyrl")
ROOT = Path(__file__).resolve().parents[2]
# The docs show the table of a recorded run: one that leaves out the test of the docs.
RECORDED = ROOT / "docs" / "measurements" / "conformance.txt"
RECORD = (
    ".venv/bin/python scripts/docs/record.py conformance -- "
    ".venv/bin/python -m pytest -q -s -p no:cacheprovider tests/conformance -k 'not docs'"
)


def replay_inspect(spec, scripts: list[Script], log_dir: Path) -> list[list[Outcome] | None]:
    """The scripts played by Inspect AI through its door, a sample each, a scripted model
    making their calls. Inspect shows a model text only and ends a sample when its episode
    ends: an outcome is a call's text (the episode's total reward on the last, `done` there),
    and the calls after the end are not made. A script Inspect refuses a call of (off the
    tool's schema: it spends no step, so the budget shown next differs) is None."""
    samples = [
        Sample(input="", id=s.name, metadata={"question_id": s.question_id}) for s in scripts
    ]
    manager = open_manager(spec.settings)
    task = Task(dataset=samples, solver=play_episode(manager), scorer=engine_verdict())
    playing = iter(scripts)
    script = None

    def model_turn(messages, tools, tool_choice, config):
        nonlocal script
        made = sum(message.role == "assistant" for message in messages)
        script = next(playing) if made == 0 else script
        if made < len(script.calls):
            reply = ModelOutput.for_tool_call("mockllm/model", *script.calls[made])
        else:
            reply = ModelOutput.from_content("mockllm/model", "")
        reply.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return reply

    model = get_model("mockllm/model", custom_outputs=model_turn)
    [log] = inspect_eval(task, model=model, log_dir=str(log_dir), max_samples=1, display="none")
    manager.shutdown()
    assert log.status == "success", log.error
    # Samples run in the dataset's order (one at a time); the log keeps them in another.
    by_name = {sample.id: sample for sample in log.samples}
    return [sample_outcomes(by_name[script.name]) for script in scripts]


def sample_outcomes(sample) -> list[Outcome] | None:
    answers = [message for message in sample.messages if message.role == "tool"]
    if any(message.error is not None for message in answers):
        return None
    verdict = sample.store[VERDICT]
    outcomes = [Outcome(sample.messages[1].text, 0.0, False, None)]
    for message in answers:
        outcomes.append(Outcome(masked(message.text, verdict["episode_id"]), 0.0, False, None))
    outcomes[-1] = replace(outcomes[-1], reward=verdict["reward"], done=True)
    return outcomes


def as_inspect_shows(episode: list[Outcome]) -> list[Outcome] | None:
    """An episode as Inspect shows it: up to its end, its rewards summed onto the last
    outcome; None for one the script leaves unanswered (the door then books the wrong-answer
    reward, which the other doors book when their client ends it, not as a call's)."""
    ending = next((i for i, o in enumerate(episode) if o.done), None)
    if ending is None:
        return None
    total = round(sum(o.reward for o in episode[: ending + 1]), 6)
    shown = [replace(o, reward=0.0, data=None) for o in episode[: ending + 1]]
    shown[-1] = replace(shown[-1], reward=total)
    return shown


def replay_trl(spec, scripts: list[Script]) -> list[list[Outcome]]:
    manager = open_manager(spec.settings)
    environment = SQLEnvTRL(manager)
    episodes = []
    for script in scripts:
        outcomes = [Outcome(environment.reset(question_id=script.question_id), 0.0, False, None)]
        episode = environment.episode
        for tool, arguments in script.calls:
            before = episode.total_reward
            text = getattr(environment, tool)(**arguments)
            reward = round(episode.total_reward - before, 6)
            outcomes.append(Outcome(masked(text, episode.episode_id), reward, episode.done, None))
        episodes.append(outcomes)
    manager.shutdown()
    return episodes


def hermes_turn(tool: str, arguments: dict[str, Any]) -> str:
    """A model's turn holding one call, as a Hermes chat template teaches it."""
    return f"<tool_call>\n{json.dumps({'name': tool, 'arguments': arguments})}\n</tool_call>"


def replay_skyrl(spec, scripts: list[Script]) -> list[list[Outcome]]:
    """The scripts through skyrl-gym: one environment a script, made from its dataset row."""
    manager = open_manager(spec.settings)
    episodes = []
    for script in scripts:
        row = skyrl_row(manager.catalog.question(script.question_id), manager.tools)
        extras = {"extra_info": row["extra_info"], "reward_spec": row["reward_spec"]}
        environment = skyrl_gym.make(doors.skyrl.ENV_ID, extras=extras, manager=manager)
        prompt, info = environment.init(row["prompt"])
        outcomes = [Outcome(prompt[-1]["content"], 0.0, False, None)]
        for tool, arguments in script.calls:
            output = environment.step(hermes_turn(tool, arguments))
            [observation] = output["observations"]
            data = comparable_data(output["metadata"]["data"], info["episode_id"])
            text = masked(observation["content"], info["episode_id"])
            outcomes.append(Outcome(text, output["reward"], output["done"], data))
        environment.close()
        episodes.append(outcomes)
    manager.shutdown()
    return episodes


@contextmanager
def opened(spec, kind: str) -> Iterator[DoorClient]:
    door = open_door(replace(spec, kind=kind))
    try:
        yield door
    finally:
        door.close()


@dataclass(frozen=True)
class Agreement:
    reference: list[list[Outcome]] = field(repr=False)
    problems: dict[str, list[str]] = field(repr=False)
    table: str


@pytest.fixture(scope="module")
def agreement(dev_door_spec, tmp_path_factory) -> Agreement:
    """The 300 scripts replayed through the doors, each compared with the engine in
    process, and the table of it that the docs show."""
    with opened(dev_door_spec, "inprocess") as door:
        settings = dev_door_spec.settings
        scripts = all_scripts(door, settings.split, settings.max_steps)
        reference = replay_door(door, scripts)
    assert len(scripts) == 300
    results = {"inprocess": reference}
    for kind in ("mcp-stdio", "mcp-http", "openenv"):
        with opened(dev_door_spec, kind) as door:
            results[kind] = replay_door(door, scripts)
    results["trl"] = replay_trl(dev_door_spec, scripts)
    results["skyrl"] = replay_skyrl(dev_door_spec, scripts)
    played = replay_inspect(dev_door_spec, scripts, tmp_path_factory.mktemp("inspect"))
    # Inspect's row: the scripts it takes every call of and that end their episode.
    compared = [
        (script, shown, got)
        for script, episode, got in zip(scripts, reference, played, strict=True)
        if got is not None and (shown := as_inspect_shows(episode)) is not None
    ]

    calls = sum(len(script.calls) for script in scripts)
    table = [f"{'door':<11}{'episodes':>9}{'calls':>7}{'identical':>11}  compared"]
    problems = {}
    for kind in DOORS:
        compare_data = kind != "trl"
        problems[kind] = differences(reference, results[kind], scripts, compare_data)
        what = "text, reward, done" + (", structured" if compare_data else "")
        identical = calls + len(scripts) - len(problems[kind])
        table.append(f"{kind:<11}{len(scripts):>9}{calls:>7}{identical:>11}  {what}")
    inspected, shown, got = (list(column) for column in zip(*compared, strict=True))
    problems["inspect"] = differences(shown, got, inspected, compare_data=False)
    outcomes = sum(len(episode) for episode in shown)
    identical = outcomes - len(problems["inspect"])
    table.append(
        f"{'inspect':<11}{len(inspected):>9}{outcomes - len(inspected):>7}{identical:>11}"
        "  text, episode reward (answered scripts Inspect takes every call of)"
    )
    return Agreement(reference, problems, "\n".join(table))


def test_the_doors_agree_on_300_scripted_episodes(agreement, capfd):
    with capfd.disabled():
        print("\n" + agreement.table)
    found = {kind: found[:3] for kind, found in agreement.problems.items() if found}
    assert found == {}
    reference = agreement.reference
    ended = [o for episode in reference for o in episode if o.text.startswith("Error: episode")]
    assert ended, "the scripts include calls after the end"


def test_the_docs_show_this_runs_table(agreement):
    recorded = RECORDED.read_text()
    assert agreement.table in recorded, (
        f"{RECORDED.relative_to(ROOT)} shows another table than this run's:\n{agreement.table}\n"
        f"record it again from the project root: {RECORD}"
    )
