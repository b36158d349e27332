"""`SQLTaskset`: the engine's questions as a verifiers v1 taskset.

A task is a question, named by the engine's selectors (its question id, database, dataset and
split). Its prompt is the contract's: the instructions as the system prompt and the engine's
opening text as the user's first turn. Its toolset (`sqlenv_verifiers.toolset`) plays the
question's episode; the rollout stops once the episode has ended, and the task's reward is the
engine's total reward for the episode, its `correct` metric the engine's verdict. Run it with

    SQLENV_DATA_DIR=DIR SQLENV_SPLIT=SPLIT vf-eval sqlenv-verifiers --model M \\
        --env.agent.harness.id null --client.base-url URL
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import verifiers.v1 as vf

from env_core.contract import INSTRUCTIONS
from env_core.factory import shared_manager
from env_core.holder import EpisodeHolder
from env_core.mixed_catalog import select_questions
from env_core.settings import Settings
from sqlenv_verifiers.toolset import EpisodeState, SQLToolset, SQLToolsetConfig


class SQLTaskData(vf.TaskData):
    question_id: str
    db_id: str
    dataset: str
    split: str


class SQLTaskConfig(vf.TaskConfig):
    tools: SQLToolsetConfig = SQLToolsetConfig()


class SQLTask(vf.Task[SQLTaskData, EpisodeState, SQLTaskConfig]):
    @classmethod
    def toolsets(cls, config: SQLTaskConfig) -> list[vf.Toolset]:
        return [SQLToolset(config.tools)]

    @property
    def key(self) -> str:
        return self.data.question_id

    @vf.stop
    async def answered(self, trace: vf.Trace) -> bool:
        return trace.state.done

    @vf.reward
    async def episode_reward(self, trace: vf.Trace) -> float:
        return trace.state.reward

    @vf.metric
    async def correct(self, trace: vf.Trace) -> float:
        return float(trace.state.correct)


class SQLTasksetConfig(vf.TasksetConfig):
    task: SQLTaskConfig = SQLTaskConfig()
    data_dir: str | None = None
    """The data directory; unset, $SQLENV_DATA_DIR (else the embedded demo)."""
    split: str | None = None
    """The split whose questions are the tasks; unset, $SQLENV_SPLIT (else dev)."""
    db_id: str | None = None
    """Only this database's questions."""
    dataset: str | None = None
    """Only this dataset's questions (in a data directory of several)."""


def placed(settings: Settings) -> dict[str, Any]:
    """The settings as another process in another folder reads them: paths made absolute."""
    paths = {"data_dir", "databases_dir", "cache_dir"}
    return {
        name: str(Path(value).resolve()) if name in paths and value else value
        for name, value in dataclasses.asdict(settings).items()
    }


class SQLTaskset(vf.Taskset[SQLTask, SQLTasksetConfig]):
    def load(self) -> Iterator[SQLTask]:
        config = self.config
        manager = shared_manager(data_dir=config.data_dir or None, split=config.split or None)
        tools = config.task.tools.model_copy(update={"settings": placed(manager.settings)})
        task_config = config.task.model_copy(update={"tools": tools})
        split = manager.settings.split
        # Each question's opening text, read from an episode started on it and ended.
        holder = EpisodeHolder(manager, idle="the taskset starts each question's episode")
        try:
            for question in select_questions(manager.catalog, split, config.db_id, config.dataset):
                opening = holder.start(question_id=question.id).start.text
                data = SQLTaskData(
                    id=question.id,
                    name=f"{question.db_id}/{question.id}",
                    prompt=opening,
                    system_prompt=INSTRUCTIONS,
                    question_id=question.id,
                    db_id=question.db_id,
                    dataset=question.dataset,
                    split=question.split,
                )
                yield SQLTask(data, task_config)
        finally:
            holder.close("the taskset is loaded")
