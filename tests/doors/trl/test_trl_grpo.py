"""GRPO through SQLEnvTRL on Spider questions, on a CPU with a tiny local model.

The model's `generate` is replaced by a scripted player (as TRL's own tests do), so the run is
deterministic: in each group one rollout plays the oracle's calls and answers correctly, the
other samples a table and answers wrongly. Everything else is real: TRL renders the prompts,
parses the tool calls, calls `SQLEnvTRL`'s methods, which reach the engine, computes the loss
and steps the optimizer on the tiny model.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from doors.trl import SQLEnvTRL, environment_factory
from training.config import load_config, tiny_config
from training.datasets import task_dataset
from training.tiny import build_tiny
from training.transcripts import oracle_transcript, tool_schemas

STEPS, BATCH, GENERATIONS = 2, 4, 2
QUESTION_LINE = re.compile(r"Question: (.*)\nDatabase: (\S+)")


def _planned_calls(messages):
    return [
        (call["function"]["name"], json.loads(call["function"]["arguments"]))
        for message in messages
        for call in message.get("tool_calls") or []
    ]


class ScriptedPlayer:
    """Stands in for `model.generate`: picks each rollout's next turn from its text so far."""

    def __init__(self, tokenizer, oracle_plans):
        self.tokenizer = tokenizer
        self.oracle_plans = oracle_plans  # (question text, db_id) -> the oracle's calls

    def plan(self, text, occurrence):
        oracle = self.oracle_plans[QUESTION_LINE.search(text).groups()]
        if "<tool_response>" in text:  # a later turn keeps to the rollout's first call
            wrong = '<tool_call>\n{"name": "sample"' in text
        else:  # a first turn: the rollouts of a group alternate
            wrong = occurrence % 2 == 1
        if not wrong:
            return oracle
        table = oracle[0][1]["table"]
        return [("sample", {"table": table, "n": 2}), ("answer", {"value": "[]"})]

    def turn(self, text, occurrence):
        plan = self.plan(text, occurrence)
        done = text.count("<tool_response>")
        if done >= len(plan):
            return "<think>\n\n</think>\n\nDone.<|im_end|>"
        tool, arguments = plan[done]
        call = json.dumps({"name": tool, "arguments": arguments})
        return f"<think>\n\n</think>\n\n<tool_call>\n{call}\n</tool_call><|im_end|>"

    def __call__(self, input_ids, **_kwargs):
        occurrences: Counter[str] = Counter()
        completions = []
        for row in input_ids:
            text = self.tokenizer.decode(row, skip_special_tokens=False)
            question = QUESTION_LINE.search(text).group(1)
            completions.append(self.tokenizer.encode(self.turn(text, occurrences[question])))
            occurrences[question] += 1
        width = max(map(len, completions))
        pad = self.tokenizer.pad_token_id
        padded = [c + [pad] * (width - len(c)) for c in completions]
        return torch.cat([input_ids, torch.tensor(padded, dtype=input_ids.dtype)], dim=1)


class EngineRewards(TrainerCallback):
    """After each step: the engine's episode rewards and what TRL recorded for the step."""

    def __init__(self, manager):
        self.manager = manager
        self.trainer = None
        self.engine: list[list[float]] = []
        self.recorded: list[list[float]] = []

    def on_step_end(self, args, state, control, **kwargs):
        episodes = [environment.episode for environment in self.trainer.environments]
        # The episodes are the engine's own, held by its episode manager.
        assert all(self.manager.get(e.episode_id) is e for e in episodes)
        self.engine.append([e.total_reward for e in episodes])
        self.recorded.append(list(self.trainer._logs["rewards"]["SQLEnvTRL"]))


@pytest.fixture
def questions(spider_catalog):
    """Single-table Spider dev questions with short results: short, cheap episodes."""
    return [
        q
        for q in spider_catalog.questions("dev_without_wta_1")
        if len(q.gold.rows) <= 3 and " join " not in q.sql.lower()
    ][: STEPS * BATCH // GENERATIONS]


def test_grpo_steps_through_sqlenv_trl_log_the_engine_rewards(spider_manager, questions, tmp_path):
    environment = SQLEnvTRL(spider_manager)
    transcripts = [oracle_transcript(environment, q) for q in questions]
    model_dir = build_tiny(transcripts, tool_schemas(environment), tmp_path / "tiny")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    plans = {
        (q.text, q.db_id): _planned_calls(t) for q, t in zip(questions, transcripts, strict=True)
    }
    steps_before = spider_manager.stats().steps

    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        args=GRPOConfig(
            **{
                **load_config(tiny_config("grpo")).trainer,
                "output_dir": str(tmp_path / "out"),
                "per_device_train_batch_size": BATCH,
                "num_generations": GENERATIONS,
                "max_steps": STEPS,
                "max_completion_length": 1536,
                "learning_rate": 1e-3,
            }
        ),
        train_dataset=task_dataset(questions),
        processing_class=tokenizer,
        environment_factory=environment_factory(spider_manager),
    )
    trainer.model.generate = ScriptedPlayer(tokenizer, plans)
    rewards = EngineRewards(spider_manager)
    rewards.trainer = trainer
    trainer.add_callback(rewards)
    weights_before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()

    logged = [entry for entry in trainer.state.log_history if "rewards/SQLEnvTRL/mean" in entry]
    assert len(logged) == STEPS
    for entry, engine, recorded in zip(logged, rewards.engine, rewards.recorded, strict=True):
        assert recorded == pytest.approx(engine, abs=1e-6)
        assert entry["rewards/SQLEnvTRL/mean"] == pytest.approx(sum(engine) / len(engine), abs=1e-6)
        # One correct (reward near 1) and one wrong (near 0) rollout in every group.
        assert sorted(r > 0.5 for r in engine) == sorted([False, True] * (BATCH // GENERATIONS))
        assert entry["tools/failure_frequency"] == 0
    oracle_calls = sum(len(plan) for plan in plans.values())
    assert spider_manager.stats().steps - steps_before == oracle_calls + 2 * len(plans)
    changed = any(
        not torch.equal(before, after)
        for before, after in zip(weights_before, trainer.model.parameters(), strict=True)
    )
    assert changed
    print(f"GRPO steps: {len(logged)}; engine rewards per step: {rewards.engine}")
    print(f"TRL logged means: {[entry['rewards/SQLEnvTRL/mean'] for entry in logged]}")
