"""Episode mode: the four tools plus start_episode/end_episode, one episode per connection.

Each MCP connection (a stdio process, an HTTP session, an in-memory client) enters the server
lifespan once in mcp 1.x, so the lifespan holds that connection's episodes and closes them when
the connection ends. Every tool also takes an optional `episode_id`, for stateless clients and
clients that run several episodes at once.
"""

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError as MCPToolError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from env_core import contract
from env_core.errors import SQLEnvError, UnknownEpisodeError
from env_core.sessions import SessionManager
from env_core.tools import TOOLS_BY_NAME
from sqlenv_mcp.results import (
    EndOutput,
    StartOutput,
    StepOutput,
    start_result,
    step_error,
    step_result,
    tool_result,
)

INSTRUCTIONS = (
    "Call start_episode first: it gives the question, the database id, the table names and the "
    "step budget (end_episode gives an episode up).\n\n" + contract.INSTRUCTIONS
)

# The range is advertised in the schema but checked by the engine, so an out-of-range n gets
# the same error, and costs the same step, through every door.
SAMPLE_SIZE = Field(
    description=TOOLS_BY_NAME["sample"].arg_descriptions["n"],
    json_schema_extra={"minimum": 1, "maximum": 20},
)
READ_ONLY = ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False)
EPISODE_ID = Annotated[
    str | None,
    Field(description="Episode to act on; omit to use this connection's current episode."),
]


@dataclass
class ConnectionEpisodes:
    """The episodes one MCP connection opened; the newest is its current episode."""

    manager: SessionManager
    current: str | None = None
    opened: list[str] = field(default_factory=list)
    owner: str = field(default_factory=lambda: uuid.uuid4().hex)

    def resolve(self, episode_id: str | None) -> str:
        if episode_id:
            return episode_id
        if self.current is None:
            raise UnknownEpisodeError(
                "no episode is running on this connection: call start_episode first "
                "(or pass the episode_id of an episode you started)"
            )
        return self.current

    def close_all(self) -> None:
        for episode_id in self.opened:
            self.manager.close(episode_id, self.owner)
        self.opened.clear()
        self.current = None


def register_episode_tools(
    server: FastMCP, manager: SessionManager, output_schemas: bool = True
) -> None:
    def connection(ctx: Context) -> ConnectionEpisodes:
        return ctx.request_context.lifespan_context

    async def step(ctx: Context, episode_id: str | None, tool: str, args: dict[str, Any]):
        episodes = connection(ctx)
        try:
            resolved = episodes.resolve(episode_id)
            result = await manager.step_async(resolved, tool, args, episodes.owner)
            return step_result(resolved, result)
        except SQLEnvError as error:
            return step_error(episode_id or episodes.current or "", tool, error)

    @server.tool(
        description="Start a new episode: returns the question, the database id, the table "
        "names and the step budget. Optionally pick the question by id, database or split, "
        "or seed the random choice.",
        annotations=ToolAnnotations(readOnlyHint=False, idempotentHint=False, openWorldHint=False),
        structured_output=output_schemas,
    )
    async def start_episode(
        ctx: Context,
        question_id: Annotated[
            str | None, Field(description="A question id such as dev:12.")
        ] = None,
        db_id: Annotated[str | None, Field(description="Draw from this database only.")] = None,
        split: Annotated[str | None, Field(description="Draw from this split.")] = None,
        seed: Annotated[int | None, Field(ge=0, description="Seed for the random choice.")] = None,
    ) -> Annotated[CallToolResult, StartOutput]:
        episodes = connection(ctx)
        try:
            episode = manager.create(
                seed=seed,
                question_id=question_id,
                db_id=db_id,
                split=split,
                owner=episodes.owner,
            )
        except SQLEnvError as error:
            raise MCPToolError(str(error)) from None
        episodes.opened.append(episode.episode_id)
        episodes.current = episode.episode_id
        return start_result(episode.start)

    spec = TOOLS_BY_NAME["describe"]

    @server.tool(
        description=spec.description, annotations=READ_ONLY, structured_output=output_schemas
    )
    async def describe(
        ctx: Context,
        table: Annotated[str, Field(description=spec.arg_descriptions["table"])],
        episode_id: EPISODE_ID = None,
    ) -> Annotated[CallToolResult, StepOutput]:
        return await step(ctx, episode_id, "describe", {"table": table})

    spec = TOOLS_BY_NAME["sample"]

    @server.tool(
        description=spec.description, annotations=READ_ONLY, structured_output=output_schemas
    )
    async def sample(
        ctx: Context,
        table: Annotated[str, Field(description=spec.arg_descriptions["table"])],
        n: Annotated[int, SAMPLE_SIZE] = 5,
        episode_id: EPISODE_ID = None,
    ) -> Annotated[CallToolResult, StepOutput]:
        return await step(ctx, episode_id, "sample", {"table": table, "n": n})

    spec = TOOLS_BY_NAME["query"]

    @server.tool(
        description=spec.description, annotations=READ_ONLY, structured_output=output_schemas
    )
    async def query(
        ctx: Context,
        sql: Annotated[str, Field(description=spec.arg_descriptions["sql"])],
        episode_id: EPISODE_ID = None,
    ) -> Annotated[CallToolResult, StepOutput]:
        return await step(ctx, episode_id, "query", {"sql": sql})

    spec = TOOLS_BY_NAME["answer"]

    @server.tool(
        description=spec.description,
        annotations=ToolAnnotations(
            readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False
        ),
        structured_output=output_schemas,
    )
    async def answer(
        ctx: Context,
        value: Annotated[str, Field(description=spec.arg_descriptions["value"])],
        episode_id: EPISODE_ID = None,
    ) -> Annotated[CallToolResult, StepOutput]:
        return await step(ctx, episode_id, "answer", {"value": value})

    @server.tool(
        description="End an episode early and free it (episodes also end when the connection "
        "closes). Omit episode_id to end this connection's current episode.",
        annotations=ToolAnnotations(
            readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False
        ),
        structured_output=output_schemas,
    )
    async def end_episode(
        ctx: Context, episode_id: EPISODE_ID = None
    ) -> Annotated[CallToolResult, EndOutput]:
        episodes = connection(ctx)
        try:
            resolved = episodes.resolve(episode_id)
        except SQLEnvError as error:
            raise MCPToolError(str(error)) from None
        closed = manager.close(resolved, episodes.owner)
        if resolved == episodes.current:
            episodes.current = None
        text = f"Episode {resolved} {'ended' if closed else 'was not open'}."
        return tool_result(text, {"episode_id": resolved, "closed": closed})


def episode_lifespan(manager: SessionManager):
    @asynccontextmanager
    async def lifespan(_server: FastMCP) -> AsyncIterator[ConnectionEpisodes]:
        episodes = ConnectionEpisodes(manager)
        try:
            yield episodes
        finally:
            episodes.close_all()  # synchronous: the exit may run in a cancelled scope

    return lifespan
