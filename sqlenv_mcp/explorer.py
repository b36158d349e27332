"""Explorer mode: describe/sample/query on the user's own SQLite files, without questions.

The same hardened executor and sandbox as in episodes, opened without `immutable` because
someone else may be writing the file: a change to the file is picked up at the next call.
One executor per database, shared by all connections (it serialises calls).
"""

import itertools
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from mcp.server.fastmcp import Context
from mcp.types import CallToolResult
from pydantic import Field

from env_core import render
from env_core.errors import (
    DataError,
    InvalidArgumentError,
    ServerBusyError,
    ToolError,
    error_data,
    shown,
)
from env_core.executor import ExecutorLimits, ReadOnlyExecutor, TableSchema
from env_core.sandbox import Sandbox, finish_async
from env_core.tools import DEFAULT_SAMPLE_ROWS, ToolSpec, check_arguments, check_names, tools_for
from sqlenv_mcp.agent_tools import AgentToolServer, Handler, take
from sqlenv_mcp.episodes import READ_ONLY, sample_size
from sqlenv_mcp.results import ExploreOutput, explore_result

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
Read-only access to SQLite databases. Call list_tables (or read the sqlenv://databases resource)
to see what is there, describe a table, then query with one SQLite SELECT per call. Nothing can
be written. Name the database with `database` when more than one is served."""
LIST_TABLES = "List the databases served (or the one named) with their tables and row counts."


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
                    f"several databases are served; name one: {self._names()}"
                )
            name = next(iter(self.paths))
        if name not in self.paths:
            raise InvalidArgumentError(f"no database {shown(name)}; databases are: {self._names()}")
        with self._lock:
            if name not in self._executors:
                self._executors[name] = ReadOnlyExecutor(
                    self.paths[name], self.limits, immutable=False, sandbox=self.sandbox
                )
            return name, self._executors[name]

    def _names(self) -> str:
        rest = "databases: list_tables lists them"
        return render.names_text(tuple(self.paths), render.MAX_LISTED_CHARS, rest)

    def schemas(self, database: str | None = None) -> dict[str, dict[str, TableSchema]]:
        """Each database (or the one named) with its tables' schemas."""
        names = [self.executor(database)[0]] if database is not None else list(self.paths)
        schemas = {}
        for name in names:
            _, executor = self.executor(name)
            schemas[name] = {table: executor.describe(table) for table in executor.tables}
        return schemas

    def listing(self) -> str:
        return listing_text(self.schemas())

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


def listing_text(schemas: dict[str, dict[str, TableSchema]]) -> str:
    """Databases with their tables and sizes, one database a line, within the budget of a
    text (see `_listed`)."""
    listed, more = _listed(schemas)
    lines = [
        f"{name}: {render.names_text(entries, share, render.ALL_TABLES) or 'no tables'}"
        for name, entries, share in listed
    ]
    if more:
        lines.append(f"… and {more:,} more databases, not shown: name one to list its tables")
    return render.within_budget("\n".join(lines))


def row_counts(schemas: dict[str, dict[str, TableSchema]]) -> dict[str, dict[str, int | None]]:
    """Each table's row count (None where it was not counted: a view, a virtual table, or a
    table too large to count in time), of the tables the listing shows."""
    return {
        name: {
            table: schema.row_count
            for table, schema in itertools.islice(
                schemas[name].items(), render.names_fitting(entries, share)
            )
        }
        for name, entries, share in _listed(schemas)[0]
    }


# A database's line lists its tables in its share of the budget, at least this many characters,
# beside its name (a file's, at most 255 bytes) and the note on the tables it leaves out.
MIN_LINE_CHARS = 1_000
LINE_FRAME_CHARS = 400


def _listed(
    schemas: dict[str, dict[str, TableSchema]],
) -> tuple[list[tuple[str, list[str], int]], int]:
    """The databases a listing shows, each with its tables' entries and the characters it may
    list them in (an equal share of the budget), and how many databases it leaves out."""
    share = max(render.MAX_TEXT_CHARS // max(len(schemas), 1) - LINE_FRAME_CHARS, MIN_LINE_CHARS)
    listed, size = [], 0
    for name, tables in schemas.items():
        size += min(share, sum(len(t) + 20 for t in tables)) + LINE_FRAME_CHARS
        if size > render.MAX_TEXT_CHARS:
            break
        listed.append((name, [f"{t} ({_size(s)})" for t, s in tables.items()], share))
    return listed, len(schemas) - len(listed)


def _size(schema: TableSchema) -> str:
    return render.row_count_text(schema.row_count) if schema.kind == "table" else schema.kind


def register_explorer_tools(
    server: AgentToolServer, databases: UserDatabases, output_schemas: bool = True
) -> None:
    """list_tables, describe, sample and query on the user's databases, each called with the
    arguments as sent (see `sqlenv_mcp.agent_tools`)."""
    specs = {spec.name: spec for spec in tools_for(databases.limits)}

    async def explore(tool: str, arguments: dict[str, Any]) -> tuple[str, str, dict]:
        database = take(arguments, "database", str)
        if tool == "list_tables":
            check_names(tool, arguments, ())
            schemas = databases.schemas(database)
            text = render.visible(listing_text(schemas))
            return database or "", text, {"databases": row_counts(schemas)}
        check_arguments(specs[tool], arguments)
        name, executor = databases.executor(database)
        if tool == "describe":
            schema = executor.describe(arguments["table"])
            return name, schema.text, render.schema_data(schema)
        if tool == "sample":
            n = arguments.get("n", DEFAULT_SAMPLE_ROWS)
            schema = executor.describe(arguments["table"])
            result = await finish_async(executor.sample_work(schema, n))
        else:
            result = await finish_async(executor.query_work(arguments["sql"]))
        return name, result.text, render.rows_data(result)

    def calls_of(tool: str) -> Handler:
        async def call(_ctx: Context, arguments: dict[str, Any]) -> CallToolResult:
            asked = arguments.get("database")
            try:
                name, text, data = await explore(tool, arguments)
            except (ToolError, ServerBusyError) as error:
                name = asked if isinstance(asked, str) else ""
                return explore_result(name, render.error_text(error), error_data(error), ok=False)
            return explore_result(name, text, data, ok=True)

        return call

    descriptions = {"list_tables": LIST_TABLES}
    descriptions.update((name, specs[name].description) for name in ("describe", "sample", "query"))
    for tool, declaration in explorer_declarations(specs).items():
        server.add_agent_tool(
            declaration,
            calls_of(tool),
            name=tool,
            description=descriptions[tool],
            annotations=READ_ONLY,
            structured_output=output_schemas,
        )


def explorer_declarations(specs: dict[str, ToolSpec]) -> dict[str, Callable[..., Any]]:
    """Signatures that declare each tool's parameters for the schema hosts read; calls go to
    the tools' handlers, never to these."""

    def list_tables(database: DATABASE = None) -> Annotated[CallToolResult, ExploreOutput]: ...

    def describe(
        table: Annotated[str, Field(description="Name of a table.")], database: DATABASE = None
    ) -> Annotated[CallToolResult, ExploreOutput]: ...

    def sample(
        table: Annotated[str, Field(description="Name of a table.")],
        n: Annotated[int, sample_size(specs["sample"])] = DEFAULT_SAMPLE_ROWS,
        database: DATABASE = None,
    ) -> Annotated[CallToolResult, ExploreOutput]: ...

    def query(
        sql: Annotated[str, Field(description=specs["query"].arg_descriptions["sql"])],
        database: DATABASE = None,
    ) -> Annotated[CallToolResult, ExploreOutput]: ...

    declared = (list_tables, describe, sample, query)
    return {declaration.__name__: declaration for declaration in declared}
