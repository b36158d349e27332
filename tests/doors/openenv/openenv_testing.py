"""Helpers for the OpenEnv door's tests: a real uvicorn server, the oracle over the client.

Each server runs in a thread of the test process on a socket bound to a free port of
127.0.0.1, and is told to exit (and joined) when the `with` block ends.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn

from doors.openenv.client import SQLEnvClient
from doors.openenv.server import build_app
from env_core.catalog import Question
from env_core.oracle import oracle_calls
from env_core.settings import Settings
from serving.asgi import bound_socket

SPIDER_SPLIT = "dev_without_wta_1"


@contextmanager
def running_server(settings: Settings, *, web: bool = False, port: int = 0) -> Iterator[str]:
    """Serve `build_app(settings)` with uvicorn, on `port` if given (a server started again at
    the address of one stopped); yields the base URL."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ENABLE_WEB_INTERFACE", "true" if web else "false")
        app = build_app(settings)
    listener = bound_socket("127.0.0.1", port)
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the OpenEnv server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listener.close()


async def play_oracle(env: SQLEnvClient, question: Question, budget: int) -> list[Any]:
    """Play the oracle over the client: `env_core.calls.drive`, awaiting each call."""
    results = []
    calls = oracle_calls(question, budget, Settings.max_rows)
    call = next(calls)
    while True:
        result = await env.call(call.tool, **call.arguments)
        results.append(result)
        if result.done:
            return results
        call = calls.send(result.observation)


def step_record(text: str, data: dict, reward: float | None, done: bool) -> tuple:
    """What must match across doors and runs: text, structured data (less the measured query
    time), reward and done."""
    data = {
        key: value for key, value in json.loads(json.dumps(data)).items() if key != "elapsed_ms"
    }
    return text, data, reward, done


def served_record(result: Any) -> tuple:
    return step_record(result.observation.text, result.observation.data, result.reward, result.done)


def require_executable(path: str) -> str:
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is needed by this test and is missing; see docs/openenv.md")
    return path
