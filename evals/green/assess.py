"""`sqlenv assess`: ask a green agent for an assessment of an agent, show its progress as it
comes and print its result. Either agent may be one of ours started here, on a free
127.0.0.1 port, for the time of the assessment."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import ExitStack
from typing import Any

import httpx
from a2a.helpers import get_data_parts, get_message_text
from a2a.types import Message, Task, TaskState
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a.utils.errors import A2AError

from env_core.command_line import CommandError
from env_core.settings import Settings
from evals.green import a2a
from serving.local_server import LocalServer


def run_assess(args: argparse.Namespace) -> int:
    """Exit status 0 when the assessment completed, 1 when the green agent ended it otherwise."""
    settings = Settings.from_arguments(args)
    with ExitStack() as started:
        green = args.green or start(started, "green", settings.arguments(("data", "episodes")))
        assessed = args.agent or start(
            started, "purple", ["--policy", args.policy, *settings.arguments(("data",))]
        )
        request = assessment_request(args, assessed)
        print(f"sqlenv assess: asking {green} to assess {assessed}", file=sys.stderr)
        final = asyncio.run(assess(green, request, os.environ.get(args.token_env)))
    if final.status.state != TaskState.TASK_STATE_COMPLETED:
        print(f"sqlenv assess: the assessment {a2a.state_name(final)}: ", end="", file=sys.stderr)
        print(a2a.reply_text(final) or "no reason given", file=sys.stderr)
        return 1
    print(a2a.reply_text(final))
    if args.out is not None:
        [result] = [data for artifact in final.artifacts for data in get_data_parts(artifact.parts)]
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"result: {args.out}")
    return 0


def start(started: ExitStack, agent: str, arguments: list[str]) -> str:
    """One of our agents on a free port, stopped when the assessment is over; its URL."""
    print(f"sqlenv assess: starting sqlenv {agent} ...", file=sys.stderr, flush=True)
    command = [sys.executable, "-m", "env_core.cli", agent, *arguments]
    server = LocalServer(command, AGENT_CARD_WELL_KNOWN_PATH)
    started.callback(server.stop)
    return server.url + "/"


def assessment_request(args: argparse.Namespace, assessed: str) -> dict[str, Any]:
    config: dict[str, Any] = {"episodes": args.episodes, "seed": args.seed}
    if args.split is not None:
        config["split"] = args.split
    if args.max_steps is not None:
        config["max_steps"] = args.max_steps
    if args.episode_timeout is not None:
        config["episode_timeout_s"] = args.episode_timeout
    return {"participants": {"agent": assessed}, "config": config}


async def assess(green_url: str, request: dict[str, Any], token: str | None) -> Task:
    """The assessment's task as it ended; each progress line on stderr as it comes."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    agent = await a2a.RemoteAgent(green_url, headers=headers).open(streaming=True)
    final, said = None, ""
    try:
        async for state in _refusals_said(
            green_url, agent.events(a2a.message(json.dumps(request)))
        ):
            if not isinstance(state, Task):
                continue
            final = state
            # Each event repeats the status it leaves unchanged: a line is shown once.
            line = (
                get_message_text(state.status.message) if state.status.HasField("message") else ""
            )
            if state.status.state == TaskState.TASK_STATE_WORKING and line != said:
                print(line, file=sys.stderr, flush=True)
                said = line
    finally:
        await agent.close()
    if final is None:
        raise CommandError(f"the green agent at {green_url} answered with no assessment task")
    return final


async def _refusals_said(green_url: str, events: AsyncIterator[Task | Message]):
    """The events, or one sentence when the green agent refuses or breaks off the request."""
    try:
        async for event in events:
            yield event
    except A2AError as error:
        cause = error.__cause__
        if isinstance(cause, httpx.HTTPStatusError) and cause.response.status_code == 401:
            raise CommandError(
                f"the green agent at {green_url} takes requests with its operator's token: "
                "set it in $SQLENV_ASSESSMENT_TOKEN (or the variable --token-env names)"
            ) from None
        raise CommandError(f"the green agent at {green_url} refused the request: {error}") from None
