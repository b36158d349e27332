"""The LLM policies with a real tiny model built here: in process through `transformers`, and
over HTTP through a real OpenAI-compatible server (`tests/llm_server.py`) running that model.

The model is the training pipeline's tiny mode: a tiny Qwen3 built locally and warm-started by
SFT on oracle transcripts of the demo data, so its turns are mostly real tool calls."""

import dataclasses
import json
import sys

import httpx
import pytest

from env_core.cli import main as sqlenv
from evals import evaluate, open_door
from evals.llm.hf_chat import HFChatPolicy
from evals.llm.settings import GenerationSettings
from evals.run_folder import RunFolder
from serving.local_server import LocalServer
from training.config import load_config, tiny_config
from training.sft import run_sft

EPISODES = 3
SEED = 5
GENERATION = GenerationSettings(temperature=0.0, max_new_tokens=96)


@pytest.fixture(scope="module")
def demo_spec(dev_door_spec):
    settings = dev_door_spec.settings.replace(data_dir=None, split="dev")
    return dataclasses.replace(dev_door_spec, settings=settings)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setenv("HF_HUB_OFFLINE", "1")
    base = load_config(tiny_config("sft"))
    out = tmp_path_factory.mktemp("sft-tiny")
    run_sft(dataclasses.replace(base, trainer={**base.trainer, "output_dir": str(out)}))
    return out


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(scope="module")
def hf_result(demo_spec, tiny_model):
    door = open_door(demo_spec)
    try:
        return evaluate(door, HFChatPolicy(str(tiny_model), GENERATION), EPISODES, SEED)
    finally:
        door.close()


def test_the_hf_policy_plays_episodes_to_the_end_counting_malformed_calls(hf_result):
    summary = hf_result.summary
    assert summary.overall.episodes == EPISODES
    assert summary.notes["model_turns"] >= EPISODES
    # Every model turn was either a tool call made (a step) or a malformed call counted.
    steps = sum(record.steps_used for record in hf_result.records)
    assert summary.notes["model_turns"] == steps + summary.notes.get("malformed_calls", 0)
    for record in hf_result.records:
        assert record.opening.startswith("Question: ")
        assert record.answered or record.notes.get("gave_up") == 1 or record.steps[-1].done
    # The warm-started model's calls reach the engine, and it answers.
    assert steps >= EPISODES
    assert hf_result.summary.answered >= 1


def test_the_openai_policy_plays_through_a_real_local_server(
    demo_spec, tiny_model, hf_result, tmp_path
):
    command = [sys.executable, "-m", "tests.llm_server", "--model", str(tiny_model)]
    server = LocalServer([*command, "--name", "tiny"], "/health")
    try:
        models = httpx.get(f"{server.url}/v1/models").json()
        assert models["data"][0]["id"] == "tiny"
        reply = httpx.post(
            f"{server.url}/v1/chat/completions",
            json={"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                  "max_tokens": 4},
            timeout=60,
        ).json()  # fmt: skip
        assert reply["object"] == "chat.completion"
        assert reply["choices"][0]["message"]["role"] == "assistant"

        out = tmp_path / "run"
        policy = ["--policy", "openai", "--base-url", f"{server.url}/v1", "--model", "tiny"]
        data = demo_spec.settings.arguments()
        run = ["--episodes", str(EPISODES), "--seed", str(SEED), "--out", str(out)]
        tokens = ["--max-new-tokens", str(GENERATION.max_new_tokens)]
        code = sqlenv(["eval", *policy, *data, *run, *tokens, "--no-progress"])
    finally:
        server.stop()
    assert code == 0
    records = [record for _, record in sorted(RunFolder(out).read_episodes().items())]
    assert len(records) == EPISODES
    assert json.loads((out / "run.json").read_text())["policy"] == "openai:tiny"
    # The same model, greedy, behind HTTP: the same turns, calls and steps as in process.
    assert [(r.question_id, r.steps, r.notes) for r in records] == [
        (r.question_id, r.steps, r.notes) for r in hf_result.records
    ]
