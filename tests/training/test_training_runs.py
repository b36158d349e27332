"""The run configurations and the GRPO entry point, in tiny mode on a CPU."""

from __future__ import annotations

import dataclasses

import pytest
from transformers import AutoTokenizer
from trl import GRPOConfig, SFTConfig
from trl.chat_template_utils import qwen3_chat_template

from training.config import CONFIG_DIR, load_config, tiny_config
from training.grpo import grpo_trainer
from training.sft import run_sft
from training.tool_calls import is_well_formed

CONFIG_CLASSES = {"sft": SFTConfig, "grpo": GRPOConfig}


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.toml")), ids=lambda path: path.stem)
def test_every_config_loads_and_names_only_real_trainer_settings(path):
    config = load_config(path)
    fields = {field.name for field in dataclasses.fields(CONFIG_CLASSES[path.stem.split("_")[0]])}
    assert set(config.trainer) <= fields
    assert config.tiny or config.name_or_path


def test_config_errors_name_what_is_missing(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text('[model]\nname_or_path = "m"\n[trainer]\nlearning_rate = 1e-5\n')
    with pytest.raises(ValueError, match="output_dir"):
        load_config(path)
    path.write_text('[modle]\n[trainer]\noutput_dir = "o"\n')
    with pytest.raises(ValueError, match="unknown tables"):
        load_config(path)


def test_the_step_budget_has_its_own_name_beside_trls_max_steps(tmp_path):
    path = tmp_path / "run.toml"
    trainer = '[trainer]\noutput_dir = "o"\nmax_steps = 500\n'
    path.write_text(f"[model]\ntiny = true\n[env]\nstep_budget = 9\n{trainer}")
    config = load_config(path)
    assert (config.settings.max_steps, config.trainer["max_steps"]) == (9, 500)
    # An old config's [env] max_steps is refused, not read as something else.
    path.write_text(f"[model]\ntiny = true\n[env]\nmax_steps = 9\n{trainer}")
    with pytest.raises(ValueError, match=r"\[env\]: max_steps is now step_budget"):
        load_config(path)
    path.write_text(f"[model]\ntiny = true\n[env]\nsteps = 9\n{trainer}")
    with pytest.raises(ValueError, match="unknown settings steps; settings are: ") as refused:
        load_config(path)
    assert "step_budget" in str(refused.value) and "max_steps" not in str(refused.value)


def test_tiny_grpo_entry_point_trains_on_spider_questions(spider_dir, cache_dir, tmp_path):
    # The tiny GRPO run with no SFT model: a fresh tiny model is built, so it rarely calls a
    # tool; this checks the entry point's wiring (data, factory, trainer), not learning.
    base = load_config(tiny_config("grpo"))
    config = dataclasses.replace(
        base,
        name_or_path=None,
        tiny=True,
        settings=base.settings.replace(data_dir=str(spider_dir), split="dev_without_wta_1"),
        limit=4,
        trainer={
            **base.trainer,
            "output_dir": str(tmp_path),
            "max_steps": 1,
            "max_completion_length": 32,
        },
    )
    trainer = grpo_trainer(config)
    assert (tmp_path / "tiny-base" / "chat_template.jinja").is_file()
    trainer.train()
    assert [e.episode.question.id for e in trainer.environments]
    assert "rewards/SQLEnvTRL/mean" in trainer.state.log_history[0]


SCHEMA = {
    "type": "function",
    "function": {
        "name": "sample",
        "parameters": {
            "type": "object",
            "properties": {"table": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["table"],
        },
    },
}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"table": "singer"}, True),
        ({"table": "singer", "n": 3}, True),
        ({}, False),
        ({"table": "singer", "rows": 3}, False),
        ({"table": 3}, False),
        ({"table": "singer", "n": True}, False),
        ("singer", False),
    ],
)
def test_well_formed_calls_fit_the_tool_schema(arguments, expected):
    message = {
        "tool_calls": [{"type": "function", "function": {"name": "sample", "arguments": arguments}}]
    }
    assert is_well_formed(message, [SCHEMA]) is expected


def test_a_turn_without_a_call_or_naming_another_tool_is_not_well_formed():
    assert not is_well_formed({"content": "Done."}, [SCHEMA])
    other = {"type": "function", "function": {"name": "drop", "arguments": {"table": "x"}}}
    assert not is_well_formed({"tool_calls": [other]}, [SCHEMA])


def test_tiny_sft_entry_point_saves_a_model_grpo_recognises(spider_dir, tmp_path):
    base = load_config(tiny_config("sft"))
    config = dataclasses.replace(
        base,
        settings=base.settings.replace(data_dir=str(spider_dir), split="dev_without_wta_1"),
        limit=4,
        trainer={**base.trainer, "output_dir": str(tmp_path), "max_steps": 2},
    )
    trainer = run_sft(config)
    assert trainer.state.global_step == 2
    saved = AutoTokenizer.from_pretrained(tmp_path)
    assert saved.chat_template == qwen3_chat_template  # TRL's GRPO then parses its tool calls
    assert (tmp_path / "model.safetensors").is_file()
