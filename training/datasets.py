"""Task datasets for GRPO: one row per question, the prompt plus the ids `SQLEnvTRL.reset` reads
and the question's dataset (its id names it too when a run mixes several)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from datasets import Dataset

from env_core.catalog import Catalog, Question
from env_core.contract import chat_tools, opening_messages
from env_core.hermes import tools_prompt
from env_core.mixed_catalog import MixedCatalog, check_limit
from env_core.tools import ToolSpec


def task_prompt() -> list[dict[str, str]]:
    """The conversational prompt every row starts from: the contract's opening with an empty
    user turn, which TRL completes with `reset`'s text (it appends it with no separator)."""
    return opening_messages("")


def task_row(question: Question) -> dict[str, Any]:
    return {
        "prompt": task_prompt(),
        "question_id": question.id,
        "dataset": question.dataset,
        "db_id": question.db_id,
        "hardness": question.hardness,
    }


def skyrl_prompt(tools: tuple[ToolSpec, ...]) -> list[dict[str, str]]:
    """The prompt of a SkyRL row: `task_prompt` with the tools in its system turn as a Hermes
    chat template writes them, since SkyRL renders a conversation with no `tools` list; with
    such a template the model reads the first turn TRL's rollouts read."""
    system, user = task_prompt()
    tools_text = tools_prompt(chat_tools(tools))
    return [{**system, "content": f"{system['content']}\n\n{tools_text}"}, user]


def skyrl_row(question: Question, tools: tuple[ToolSpec, ...]) -> dict[str, Any]:
    """A SkyRL row: the prompt `SQLEnvSkyRL.init` completes, its `env_class`, and the selectors
    it starts the episode from in `extra_info` (the engine owns the reward: no ground truth)."""
    return {
        "prompt": skyrl_prompt(tools),
        "env_class": "sqlenv",
        "reward_spec": {"method": "env", "ground_truth": None},
        "extra_info": {
            name: value for name, value in task_row(question).items() if name != "prompt"
        },
    }


def choose_questions(
    catalog: Catalog | MixedCatalog, split: str, limit: int | None = None, seed: int = 0
) -> list[Question]:
    """The split's questions in a seeded random order, cut to `limit`."""
    check_limit(limit)
    questions = list(catalog.questions(split))
    random.Random(seed).shuffle(questions)
    return questions[:limit]


def task_dataset(questions: Sequence[Question]) -> Dataset:
    """A GRPO dataset: columns `prompt`, `question_id`, `dataset`, `db_id`, `hardness`."""
    return Dataset.from_list([task_row(question) for question in questions])


def write_skyrl_parquet(
    questions: Sequence[Question], tools: tuple[ToolSpec, ...], path: str
) -> None:
    """SkyRL's training data: one `skyrl_row` a question (`tools`: the served tools, an
    `EpisodeManager`'s `tools`), written as parquet."""
    rows = [skyrl_row(question, tools) for question in questions]
    Dataset.from_list(rows).to_parquet(path)
