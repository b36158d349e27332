"""Explorer mode: describe/sample/query on the user's own SQLite files, without questions.

The same hardened executor and sandbox as in episodes, opened without `immutable` because
someone else may be writing the file: a change to the file is picked up at the next call.
One executor per database, shared by all connections (it serialises calls).
"""

import logging
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult
from pydantic import Field

from env_core import render
from env_core.errors import DataError, InvalidArgumentError, ToolError, error_kind
from env_core.executor import ExecutorLimits, ReadOnlyExecutor
from env_core.sandbox import Sandbox, finish_async
from env_core.tools import DEFAULT_SAMPLE_ROWS, tools_for
from sqlenv_mcp.episodes import READ_ONLY, sample_size
from sqlenv_mcp.results import ExploreOutput, explore_result

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
Read-only access to SQLite databases. Read the sqlenv://databases resource (or call describe on
a table) to see what is there, then query with one SQLite SELECT per call. Nothing can be
written. Name the database with `database` when more than one is served."""


class UserDatabases:
    def __init__(
        self, paths: dict[str, Path], limits: ExecutorLimits, sandbox: Sandbox | None = None
    ) -> None:
        self.paths = paths
        self.limits = limits
        self.sandbox = sandbox or Sandbox()
        self._executors: dict[str, ReadOnlyExecutor] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_path(
        cls, path: Path, limits: ExecutorLimits, sandbox: Sandbox | None = None
    ) -> "UserDatabases":
        """A single SQLite file, or every SQLite file directly inside a folder (links that
        lead out of the folder are left out)."""
        path = Path(path).expanduser()
        if path.is_dir():
            files = _files_inside(path)
        elif path.is_file():
            files = [path]
        else:
            raise DataError(f"--db {path}: no such file or folder")
        if not files:
            raise DataError(f"--db {path}: the folder has no {', '.join(SQLITE_SUFFIXES)} files")
        databases = cls({file.stem: file.resolve() for file in files}, limits, sandbox)
        for name in databases.paths:
            databases.executor(name)  # fail at start-up, not at the first call
        return databases

    def executor(self, name: str | None) -> tuple[str, ReadOnlyExecutor]:
        if name is None:
            if len(self.paths) > 1:
                raise InvalidArgumentError(
                    f"several databases are served; name one: {', '.join(self.paths)}"
                )
            name = next(iter(self.paths))
        if name not in self.paths:
            raise InvalidArgumentError(
                f"no database {name!r}; databases are: {', '.join(self.paths)}"
            )
        with self._lock:
            if name not in self._executors:
                self._executors[name] = ReadOnlyExecutor(
                    self.paths[name], self.limits, immutable=False, sandbox=self.sandbox
                )
            return name, self._executors[name]

    def listing(self) -> str:
        lines = []
        for name in self.paths:
            _, executor = self.executor(name)
            tables = ", ".join(
                f"{t} ({executor.describe(t).row_count} rows)" for t in executor.tables
            )
            lines.append(f"{name}: {tables or 'no tables'}")
        return "\n".join(lines)

    def close(self) -> None:
        with self._lock:
            for executor in self._executors.values():
                executor.close()
            self._executors.clear()
        self.sandbox.close()


def _files_inside(folder: Path) -> list[Path]:
    inside = folder.resolve()
    files = []
    for candidate in sorted(folder.iterdir()):
        if candidate.suffix not in SQLITE_SUFFIXES or not candidate.is_file():
            continue
        if not candidate.resolve().is_relative_to(inside):
            log.warning("--db: %s leads out of the folder; it is not served", candidate.name)
            continue
        files.append(candidate)
    return files


DATABASE = Annotated[
    str | None, Field(description="Database to use; may be omitted when only one is served.")
]


def register_explorer_tools(
    server: FastMCP, databases: UserDatabases, output_schemas: bool = True
) -> None:
    async def run(
        database: str | None, work: Callable[[ReadOnlyExecutor], Awaitable[tuple[str, dict]]]
    ) -> CallToolResult:
        try:
            name, executor = databases.executor(database)
            text, data = await work(executor)
        except ToolError as error:
            data = {"error": error_kind(error), "message": str(error)}
            return explore_result(database or "", render.error_text(error), data, ok=False)
        return explore_result(name, text, data, ok=True)

    async def describe_table(table: str, executor: ReadOnlyExecutor) -> tuple[str, dict]:
        schema = executor.describe(table)
        return render.schema_text(schema), render.schema_data(schema)

    async def sample_table(table: str, n: int, executor: ReadOnlyExecutor) -> tuple[str, dict]:
        result = await finish_async(executor.sample_work(table, n))
        return render.rows_text(result), render.rows_data(result)

    async def run_query(sql: str, executor: ReadOnlyExecutor) -> tuple[str, dict]:
        result = await finish_async(executor.query_work(sql))
        return render.rows_text(result), render.rows_data(result)

    specs = {spec.name: spec for spec in tools_for(databases.limits)}
    spec = specs["describe"]

    @server.tool(
        description=spec.description, annotations=READ_ONLY, structured_output=output_schemas
    )
    async def describe(
        table: Annotated[str, Field(description="Name of a table.")], database: DATABASE = None
    ) -> Annotated[CallToolResult, ExploreOutput]:
        return await run(database, lambda executor: describe_table(table, executor))

    spec = specs["sample"]

    @server.tool(
        description=spec.description, annotations=READ_ONLY, structured_output=output_schemas
    )
    async def sample(
        table: Annotated[str, Field(description="Name of a table.")],
        n: Annotated[int, sample_size(spec)] = DEFAULT_SAMPLE_ROWS,
        database: DATABASE = None,
    ) -> Annotated[CallToolResult, ExploreOutput]:
        return await run(database, lambda executor: sample_table(table, n, executor))

    spec = specs["query"]

    @server.tool(
        description=spec.description, annotations=READ_ONLY, structured_output=output_schemas
    )
    async def query(
        sql: Annotated[str, Field(description=spec.arg_descriptions["sql"])],
        database: DATABASE = None,
    ) -> Annotated[CallToolResult, ExploreOutput]:
        return await run(database, lambda executor: run_query(sql, executor))
