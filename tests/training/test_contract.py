"""One agent contract: the first turn a model reads is the same token for token in GRPO training
and in evaluation with `--policy hf` and `--policy openai`, with the tiny local model's chat
template (Qwen3's, which TRL swaps for its training template while it trains) and with Qwen2.5's.

Every path runs for real and the model's `generate` records what it is given: GRPOTrainer with
`environment_factory`, the HF policy through `evals.play.play_episode`, and the OpenAI policy
through HTTP to the local OpenAI-compatible server (`tests/llm_server.py`) loading the same model.
"""

from __future__ import annotations

import functools
import socket
import threading
import time

import pytest
import torch
import uvicorn
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from transformers import AutoTokenizer, Qwen3ForCausalLM
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import qwen2_5_chat_template, qwen3_chat_template

from doors.inspect_task import sqlenv_task
from doors.skyrl import SQLEnvSkyRL
from doors.trl import SQLEnvTRL, environment_factory
from env_core.contract import INSTRUCTIONS, chat_tools, opening_messages
from env_core.settings import Settings
from env_core.tools import TOOLS
from evals.door_clients import DoorSpec, InProcessClient
from evals.llm.hf_chat import HFChatPolicy
from evals.llm.openai_chat import OpenAIChatPolicy
from evals.plan import EpisodeTask
from evals.play import play_episode
from tests.llm_server import build_app
from training.config import load_config, tiny_config
from training.datasets import skyrl_row, task_dataset
from training.tiny import build_tiny, build_tokenizer
from training.transcripts import oracle_transcript, tool_schemas

DEV = "dev_without_wta_1"


class FirstTurns:
    """Stands in for `generate`: records each prompt's tokens (left padding removed) and
    answers with a closing turn, which ends the rollout or the policy's episode."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.prompts: list[list[int]] = []

    def __call__(self, *args, **kwargs):
        input_ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
        pad = self.tokenizer.pad_token_id
        for row in input_ids.tolist():
            start = next(i for i, token in enumerate(row) if token != pad)
            self.prompts.append(row[start:])
        closing = self.tokenizer.encode("Done.<|im_end|>")
        tail = torch.tensor([closing] * len(input_ids), dtype=input_ids.dtype)
        return torch.cat([input_ids, tail], dim=1)


@pytest.fixture(scope="module")
def tiny_dir(spider_catalog, tmp_path_factory):
    from env_core.manager import EpisodeManager
    from env_core.settings import Settings

    manager = EpisodeManager(spider_catalog, Settings(split=DEV))
    environment = SQLEnvTRL(manager)
    questions = spider_catalog.questions(DEV)[:4]
    transcripts = [oracle_transcript(environment, question) for question in questions]
    path = build_tiny(transcripts, tool_schemas(environment), tmp_path_factory.mktemp("tiny"))
    manager.shutdown()
    return path


@pytest.fixture(params=["tiny_qwen3", "qwen2_5"])
def model_dir(request, tiny_dir, tmp_path):
    """The tiny model, with the template under test saved as its own."""
    if request.param == "tiny_qwen3":
        return str(tiny_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    tokenizer.chat_template = qwen2_5_chat_template
    model = Qwen3ForCausalLM.from_pretrained(tiny_dir)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    return str(tmp_path / "model")


def grpo_first_turn(model_dir, spider_manager, question, tmp_path) -> list[int]:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    turns = FirstTurns(tokenizer)
    trainer = GRPOTrainer(
        model=Qwen3ForCausalLM.from_pretrained(model_dir),
        args=GRPOConfig(
            **{
                **load_config(tiny_config("grpo")).trainer,
                "output_dir": str(tmp_path / "grpo"),
                "per_device_train_batch_size": 2,
                "num_generations": 2,
                "max_steps": 1,
                "max_completion_length": 64,
            }
        ),
        train_dataset=task_dataset([question]),
        processing_class=tokenizer,
        environment_factory=environment_factory(spider_manager),
    )
    trainer.model.generate = turns
    trainer.train()
    assert turns.prompts[0] == turns.prompts[1]  # the group's two rollouts share the prompt
    return turns.prompts[0]


def policy_first_turn(policy, spider_dir, cache_dir, question, monkeypatch, tokenizer) -> list[int]:
    turns = FirstTurns(tokenizer)
    monkeypatch.setattr(Qwen3ForCausalLM, "generate", lambda _model, *a, **kw: turns(*a, **kw))
    settings = Settings(data_dir=str(spider_dir), split=DEV, cache_dir=str(cache_dir))
    door = InProcessClient(DoorSpec("inprocess", settings))
    play_episode(door, policy, EpisodeTask(0, question.id), seed=0)
    door.close()
    return turns.prompts[0]


@pytest.fixture
def openai_server(model_dir):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(build_app(model_dir, "tiny"), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    server.should_exit = True
    thread.join(timeout=30)
    listener.close()


def test_training_and_evaluation_show_the_same_first_turn(
    model_dir, openai_server, spider_manager, spider_dir, cache_dir, monkeypatch, tmp_path
):
    question = spider_manager.catalog.questions(DEV)[7]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    in_training = grpo_first_turn(model_dir, spider_manager, question, tmp_path)
    with_hf = policy_first_turn(
        HFChatPolicy(model_dir), spider_dir, cache_dir, question, monkeypatch, tokenizer
    )
    with_openai = policy_first_turn(
        OpenAIChatPolicy(openai_server, "tiny"),
        spider_dir,
        cache_dir,
        question,
        monkeypatch,
        tokenizer,
    )
    assert with_hf == in_training
    assert with_openai == in_training
    text = tokenizer.decode(in_training)
    assert INSTRUCTIONS in text and question.text in text
    # The tools appear in the contract's order with the contract's schema.
    names = [tool["function"]["name"] for tool in chat_tools(TOOLS)]
    positions = [text.index(f'"name": "{name}"') for name in names]
    assert positions == sorted(positions)


def test_the_contract_tools_are_what_trl_renders(spider_manager):
    environment = environment_factory(spider_manager)()
    assert tool_schemas(environment) == chat_tools(spider_manager.tools)


def test_the_dataset_prompt_is_the_contract_opening(spider_manager):
    rows = task_dataset(spider_manager.catalog.questions(DEV)[:2])
    environment = SQLEnvTRL(spider_manager)
    opening = environment.reset(question_id=rows[0]["question_id"])
    prompt = rows[0]["prompt"]
    completed = [*prompt[:-1], {**prompt[-1], "content": prompt[-1]["content"] + opening}]
    assert completed == opening_messages(opening)


@pytest.mark.parametrize("template", [qwen2_5_chat_template, qwen3_chat_template])
def test_a_skyrl_row_shows_the_first_turn_trl_shows(template, spider_manager):
    """SkyRL renders a rollout's conversation with no `tools` list: a row's prompt, completed
    by the environment's `init`, reads as TRL's first turn (tools rendered by the template)."""
    question = spider_manager.catalog.questions(DEV)[7]
    row = skyrl_row(question, spider_manager.tools)
    environment = SQLEnvSkyRL(extras={"extra_info": row["extra_info"]}, manager=spider_manager)
    conversation, _ = environment.init(row["prompt"])
    environment.close()
    start = conversation[-1]["content"]  # the row's user turn is empty
    renderer = build_tokenizer([""], vocab_size=300)
    render = functools.partial(
        renderer.apply_chat_template,
        chat_template=template,
        add_generation_prompt=True,
        tokenize=False,
    )
    in_trl = render(opening_messages(start), tools=chat_tools(spider_manager.tools))
    assert render(conversation) == in_trl


def test_the_inspect_door_shows_the_contract_tools_and_first_turn(
    spider_dir, spider_manager, tmp_path
):
    """What Inspect AI sends a model through the door: the contract's tools (names,
    descriptions, parameters, order) and the contract's first turn."""
    seen = []

    def model_turn(messages, tools, tool_choice, config):
        seen.append((messages, tools))
        reply = ModelOutput.from_content("mockllm/model", "No call.")
        reply.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return reply

    task = sqlenv_task(data_dir=str(spider_dir), split=DEV, limit=1)
    model = get_model("mockllm/model", custom_outputs=model_turn)
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    [(messages, tools)] = seen
    rendered = [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": {
                    "type": "object",
                    "properties": {
                        name: {"type": param.type, "description": param.description}
                        for name, param in tool.parameters.properties.items()
                    },
                    "required": tool.parameters.required,
                },
                "return": {"type": "string"},
            },
        }
        for tool in tools
    ]
    assert rendered == chat_tools(TOOLS)
    episode = spider_manager.create(question_id=log.samples[0].id)
    opening = opening_messages(episode.start.text)
    assert [{"role": m.role, "content": m.text} for m in messages] == opening
