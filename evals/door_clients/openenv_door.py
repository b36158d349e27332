"""The OpenEnv door: the typed `SQLEnvClient` over the OpenEnv server's WebSocket.

One client is one server session holding one episode; `reset` on the next question ends the
previous episode, so `end` has nothing to do. When the connection drops, the client's next call
opens a new session, which has no episode: that call raises `ConnectionError` rather than
recording the session's refusal as the episode's end, which would score the agent for it. A
call the dropped connection interrupts raises it too, rather than the socket library's error.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from openenv.core.env_server.mcp_types import CallToolAction

from doors.openenv.client import SQLEnvClient
from env_core.episode import EpisodeStart, ToolResult
from env_core.errors import error_from
from evals.door_clients.spec import DoorSpec, check_same_catalog, check_same_episodes
from serving.local_server import LocalServer, check_reachable
from serving.server_reads import get_json


class OpenEnvDoorClient:
    def __init__(self, spec: DoorSpec) -> None:
        self.spec = spec
        self.catalog = spec.load_catalog()
        self._server: LocalServer | None = None
        url = spec.url
        if url is not None:
            check_reachable(url, "OpenEnv server", "/health")
            served = get_json(url, "/catalog", "OpenEnv server")
            check_same_catalog(url, served, self.catalog, spec.settings.split)
            check_same_episodes(url, served, spec.settings)
        else:
            command = [sys.executable, "-m", "doors.commands"]
            self._server = LocalServer(command + spec.server_arguments(), "/health")
            url = self._server.url
        self._url = url
        try:
            self._client = SQLEnvClient(base_url=url).sync()
        except BaseException:
            self.close()
            raise

    def start(self, question_id: str) -> EpisodeStart:
        with self._losing("the episode it was starting"):
            observation = self._client.reset(question_id=question_id).observation
        if observation.error:
            raise error_from(observation.data)
        data = observation.data
        return EpisodeStart(
            observation.episode_id,
            data["question"],
            data["db_id"],
            tuple(data["tables"]),
            data["budget"],
            observation.text,
        )

    def step(self, episode_id: str, tool: str, arguments: Mapping[str, Any]) -> ToolResult:
        action = CallToolAction(tool_name=tool, arguments=dict(arguments))
        with self._losing(f"episode {episode_id}"):
            result = self._client.step(action)
        observation = result.observation
        if observation.episode_id != episode_id:
            raise self._lost(f"episode {episode_id}", f"a new session answered: {observation.text}")
        return ToolResult(
            tool,
            observation.ok,
            observation.text,
            observation.data,
            result.reward,
            result.done,
        )

    def end(self, episode_id: str) -> None:
        pass

    @contextmanager
    def _losing(self, what: str) -> Iterator[None]:
        """A call on the connection, whose closing (the server went away) loses `what`."""
        try:
            yield
        except ConnectionError as error:  # the client's ServerError: closed, timed out, garbled
            raise self._lost(what, str(error)) from None

    def _lost(self, what: str, why: str) -> ConnectionError:
        return ConnectionError(
            f"the connection to the OpenEnv server at {self._url} was lost, and {what} with "
            f"it ({why})"
        )

    def worker_spec(self) -> DoorSpec:
        return self.spec.at(self._server.url) if self._server else self.spec

    def close(self) -> None:
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()
        if self._server is not None:
            self._server.stop()
            self._server = None
