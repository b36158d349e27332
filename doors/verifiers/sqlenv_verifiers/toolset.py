"""`SQLToolset`: the engine's tools for one verifiers rollout, served over MCP.

verifiers starts a toolset in a process of its own for each rollout (`python -m
sqlenv_verifiers.toolset`) and hands it the rollout's task. This one opens the engine under the
taskset's settings, starts the task's question in an `EpisodeHolder`, and lists the engine's
tools from the tool table: their own names (no prefix), descriptions and parameter schemas, in
the contract's order. A call reaches the engine with its arguments as the model wrote them (the
engine checks them and answers a mistake in its own words, as through every door) and is
answered with the engine's text. After the start and after each call the episode's standing is
written to the rollout's state, where the task's reward reads it. The episode ends with the
process, which ends with the rollout.
"""

from __future__ import annotations

from typing import Any

import anyio
import verifiers.v1 as vf
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, Tool
from pydantic import Field

from env_core.factory import open_manager
from env_core.holder import EpisodeHolder
from env_core.settings import Settings

NO_EPISODE = "no episode is running; the rollout's task starts one"


class EpisodeState(vf.State):
    """The rollout's episode as the engine stands it, kept in the rollout's trace."""

    episode_id: str = ""
    done: bool = False
    correct: bool = False
    reward: float = 0.0
    """The total reward the episode ends with if the rollout ends now: an unanswered one books
    the wrong-answer reward, as `EpisodeHolder.abandon` does at every door's end."""


class SQLToolsetConfig(vf.ToolsetConfig):
    settings: dict[str, Any] = Field(default_factory=dict)
    """The engine's `Settings`, the taskset's (its paths absolute: the process runs elsewhere)."""


class SQLToolset(vf.Toolset[SQLToolsetConfig, EpisodeState]):
    TOOL_PREFIX = None  # the tools' own names, as every door lists them

    async def setup(self) -> None:
        settings = Settings(**self.config.settings)
        manager = await anyio.to_thread.run_sync(open_manager, settings)
        self.holder = EpisodeHolder(manager, idle=NO_EPISODE)
        # Run when the server stops (the rollout is over), last in first out.
        self._exit_stack.callback(manager.shutdown)
        self._exit_stack.callback(self.holder.close, "the rollout is over")

    async def setup_task(self, task: Any) -> None:
        """`task`: the rollout's task data (an `SQLTaskData`)."""
        self.holder.start(question_id=task.question_id)
        # Written now, so a rollout that makes no call still scores the engine's reward.
        await self._with_state(self._report)()

    def register(self, mcp: MCPServer) -> None:
        """List the engine's tools by their ready schemas and answer their calls unchecked
        by the SDK, which would check them against a Python signature in its own words."""
        tools = [
            Tool(name=spec.name, description=spec.description, input_schema=spec.parameters)
            for spec in self.holder.manager.tools
        ]

        async def list_tools() -> list[Tool]:
            return tools

        mcp.list_tools = list_tools  # type: ignore[method-assign]
        mcp.call_tool = self._with_state(self._call)  # type: ignore[method-assign]

    async def _call(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> CallToolResult:
        result = await anyio.to_thread.run_sync(self.holder.call, name, arguments)
        self._report()
        return CallToolResult(
            content=[TextContent(type="text", text=result.text)], is_error=not result.ok
        )

    def _report(self) -> None:
        episode = self.holder.episode
        if episode is not None:
            self.state.episode_id = episode.episode_id
            self.state.done = episode.done
            self.state.correct = bool(episode.correct)
            self.state.reward = episode.closing_total


if __name__ == "__main__":
    SQLToolset.run()
