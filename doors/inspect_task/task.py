"""`sqlenv_task`: the engine's questions as an Inspect AI task.

A sample is a question; its solver starts the question's episode in an `EpisodeHolder`, gives
the model the contract's instructions and the engine's opening text, and lets Inspect's
`react()` agent call the engine's tools (built from the tool table, the same names,
descriptions and parameters as every door) until `answer` ends the episode or the budget is
spent. The episode then ends, and its verdict and total reward are kept in the sample's store,
where the scorer reads them. Run it with

    inspect eval doors/inspect_task/task.py@sqlenv_task -T data_dir=DIR -T split=SPLIT --model M
"""

from __future__ import annotations

from typing import Any

import anyio
from inspect_ai import Task, task
from inspect_ai.agent import AgentState, as_solver, react
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.tool import ToolDef, ToolParam, ToolParams
from inspect_ai.util import store

from env_core.contract import INSTRUCTIONS
from env_core.factory import shared_manager
from env_core.holder import EpisodeHolder
from env_core.manager import EpisodeManager
from env_core.mixed_catalog import check_limit, select_questions
from env_core.tools import ToolSpec

NO_EPISODE = "no episode is running; the sample's solver starts one"
VERDICT = "sqlenv_verdict"  # the store key of the ended episode's verdict


def engine_tool(spec: ToolSpec, holder: EpisodeHolder) -> ToolDef:
    """One engine tool for Inspect: the call's arguments go to the engine as the model wrote
    them, and the engine's text comes back."""

    async def call(**arguments: Any) -> str:
        result = await anyio.to_thread.run_sync(holder.call, spec.name, arguments)
        return result.text

    parameters = ToolParams(
        properties={
            name: ToolParam(**schema) for name, schema in spec.parameters["properties"].items()
        },
        required=list(spec.parameters["required"]),
    )
    return ToolDef(call, name=spec.name, description=spec.description, parameters=parameters)


@solver
def play_episode(manager: EpisodeManager):
    """Start the sample's episode, let the agent play it, end it and keep its verdict."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        holder = EpisodeHolder(manager, idle=NO_EPISODE)
        try:
            episode = holder.start(question_id=state.metadata["question_id"])
            state.messages = [
                ChatMessageSystem(content=INSTRUCTIONS),
                ChatMessageUser(content=episode.start.text),
            ]

            async def going_on(agent: AgentState) -> bool:
                # A reply without a tool call ends the sample, the episode unanswered.
                return not episode.done and bool(agent.output.message.tool_calls)

            agent = react(
                prompt=None,
                tools=[engine_tool(spec, holder) for spec in manager.tools],
                submit=False,
                on_continue=going_on,
            )
            state = await as_solver(agent)(state, generate)
            total = holder.abandon()
            verdict = {"episode_id": episode.episode_id, "correct": bool(episode.correct)}
            store().set(VERDICT, {**verdict, "reward": total})
        finally:
            holder.close("the sample is over")
        return state

    return solve


@scorer(metrics=[accuracy()])
def engine_verdict():
    """The engine's verdict on the episode; its total reward in the score's metadata."""

    async def score(state: TaskState, target: Target) -> Score:
        verdict = store().get(VERDICT, {"correct": False, "reward": 0.0})
        return Score(
            value=CORRECT if verdict["correct"] else INCORRECT,
            metadata={"reward": verdict["reward"]},
        )

    return score


@task
def sqlenv_task(
    data_dir: str | None = None,
    split: str | None = None,
    db_id: str | None = None,
    dataset: str | None = None,
    limit: int | None = None,
) -> Task:
    """The served split's questions (those of `db_id` / `dataset` if given, the first `limit`)."""
    check_limit(limit)
    manager = shared_manager(data_dir=data_dir, split=split)
    questions = select_questions(manager.catalog, split or manager.settings.split, db_id, dataset)[
        :limit
    ]
    samples = [
        Sample(
            input=question.text,
            id=question.id,
            metadata={
                "question_id": question.id,
                "db_id": question.db_id,
                "dataset": question.dataset,
                "split": question.split,
            },
        )
        for question in questions
    ]
    return Task(
        dataset=MemoryDataset(samples, name="sqlenv"),
        solver=play_episode(manager),
        scorer=engine_verdict(),
    )
