"""Explorer mode: describe/sample/query on the user's own SQLite files, without questions.

The same hardened executor and sandbox as in episodes, opened without `immutable` because
someone else may be writing the file: a change to the file is picked up at the next call.
One executor per database, shared by all connections (it serialises calls).
"""

import itertools
import logging
import os
import threading
from pathlib import Path
from typing import Any

from mcp.types import CallToolResult

from env_core import render
from env_core.errors import (
    DataError,
    InvalidArgumentError,
    ServerBusyError,
    ToolError,
    error_data,
    shown,
)
from env_core.executor import ReadOnlyExecutor
from env_core.executor_limits import ExecutorLimits
from env_core.render import TableSchema
from env_core.sandbox import Sandbox, finish_async
from env_core.tools import (
    Target,
    ToolSpec,
    check_arguments,
    check_names,
    exploring,
    object_schema,
)
from sqlenv_mcp.agent_tools import (
    READ_ONLY,
    AgentTool,
    AgentToolServer,
    Handler,
    declared,
    engine_tool,
    take,
)
from sqlenv_mcp.results import ExploreOutput, explore_result
from sqlenv_mcp.sdk import Caller
from sqlenv_mcp.served_files import SQLITE_SUFFIXES, Identity, ServedFile, files_inside

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
Read-only access to SQLite databases. Call list_tables (or read the sqlenv://databases resource)
to see what is there, describe a table, then query with one SQLite SELECT per call. Nothing can
be written. Name the database with `database` when more than one is served."""
LIST_TABLES = "List the databases served (or the one named) with their tables and row counts."


class UserDatabases:
    """The files served, by name, each checked (`ServedFile.check`) whenever a call uses it:
    its executor is opened again when the file was replaced, and closed when the file can no
    longer be served."""

    def __init__(
        self, files: dict[str, ServedFile], limits: ExecutorLimits, sandbox: Sandbox | None = None
    ) -> None:
        self.files = files
        self.limits = limits
        self.sandbox = sandbox or Sandbox()
        self._executors: dict[str, tuple[Identity, ReadOnlyExecutor]] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_path(
        cls, path: Path, limits: ExecutorLimits, sandbox: Sandbox | None = None
    ) -> "UserDatabases":
        """A single SQLite file, or every SQLite file directly inside a folder (one that
        cannot be served, such as a link out of the folder, is left out with a warning)."""
        path = Path(path).expanduser()
        if not path.is_dir():
            lone = ServedFile(path, Path(os.path.realpath(path)))
            databases = cls({path.stem: lone}, limits, sandbox)
            databases.executor(path.stem)  # fail at start-up, not at the first call
            return databases
        files = files_inside(path)
        if not files:
            raise DataError(f"--db {path}: the folder has no {', '.join(SQLITE_SUFFIXES)} files")
        databases = cls({file.path.stem: file for file in files}, limits, sandbox)
        for name in list(databases.files):
            try:
                databases.executor(name)
            except DataError as error:
                log.warning("--db: %s", error)
                del databases.files[name]
        if not databases.files:
            raise DataError(f"--db {path}: no file in the folder can be served")
        return databases

    def executor(self, name: str | None) -> tuple[str, ReadOnlyExecutor]:
        """The database named (or the only one) and its executor, opened on the file as it
        is now; DataError if the file cannot be served now."""
        if name is None:
            if len(self.files) > 1:
                raise InvalidArgumentError(
                    f"several databases are served; name one: {self._names()}"
                )
            name = next(iter(self.files))
        if name not in self.files:
            raise InvalidArgumentError(f"no database {shown(name)}; databases are: {self._names()}")
        with self._lock:
            held = self._opened(self.files[name], self._executors.pop(name, None))
            self._executors[name] = held
            return name, held[1]

    def _opened(
        self, served: ServedFile, held: tuple[Identity, ReadOnlyExecutor] | None
    ) -> tuple[Identity, ReadOnlyExecutor]:
        """The executor `held` if it reads the file as it is now (it is closed otherwise),
        else one opened on the file."""
        try:
            real, identity = served.check()
        except DataError:
            _close(held)
            raise
        if held is not None and held[0] != identity:
            _close(held)
            held = None
        try:
            if held is None:
                executor = ReadOnlyExecutor(
                    real, self.limits, immutable=False, sandbox=self.sandbox
                )
                held = (identity, executor)
            held[1].tables  # noqa: B018  (opens the file again if it was written since)
        except DataError:
            _close(held)
            raise served.unopenable() from None
        return held

    def unreadable(self, name: str) -> DataError:
        """The file changed into one that cannot be read while a call used it: its executor
        is closed, and the error says why."""
        with self._lock:
            _close(self._executors.pop(name, None))
        return self.files[name].unopenable()

    def _names(self) -> str:
        rest = "databases: list_tables lists them"
        return render.names_text(tuple(self.files), render.MAX_LISTED_CHARS, rest)

    def schemas(self, database: str | None = None) -> dict[str, dict[str, TableSchema]]:
        """Each database (or the one named) with its tables' schemas."""
        names = [self.executor(database)[0]] if database is not None else list(self.files)
        schemas = {}
        for name in names:
            _, executor = self.executor(name)
            try:
                schemas[name] = {table: executor.describe(table) for table in executor.tables}
            except DataError:
                raise self.unreadable(name) from None
        return schemas

    def listing(self) -> str:
        return listing_text(self.schemas())

    def close(self) -> None:
        with self._lock:
            for _, executor in self._executors.values():
                executor.close()
            self._executors.clear()
        self.sandbox.close()


def _close(held: tuple[Identity, ReadOnlyExecutor] | None) -> None:
    if held is not None:
        held[1].close()


DATABASE = {
    "database": {
        "type": "string",
        "description": "Database to use; may be omitted when only one is served.",
    }
}
# A table of any file served, not of an episode's database.
TABLE = {"type": "string", "description": "Name of a table."}


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
    """list_tables and the tools that explore, on the user's databases, each called with the
    arguments as sent (see `sqlenv_mcp.agent_tools`)."""
    limits = databases.limits

    async def list_tables(_caller: Caller, arguments: dict[str, Any]) -> CallToolResult:
        asked = arguments.get("database")
        try:
            database = take(arguments, "database", str)
            check_names("list_tables", arguments, ())
            schemas = databases.schemas(database)
        except (ToolError, ServerBusyError, DataError) as error:
            return _failed(asked, error)
        text = render.visible(listing_text(schemas))
        return explore_result(database or "", text, {"databases": row_counts(schemas)}, ok=True)

    async def explore(spec: ToolSpec, arguments: dict[str, Any]) -> tuple[str, str, dict]:
        database = take(arguments, "database", str)
        check_arguments(spec, arguments)
        name, executor = databases.executor(database)
        try:
            explored = await finish_async(spec.handler(Target(executor), arguments))
        except DataError:
            raise databases.unreadable(name) from None
        return name, explored.text, explored.data

    def calls_of(spec: ToolSpec) -> Handler:
        async def call(_caller: Caller, arguments: dict[str, Any]) -> CallToolResult:
            asked = arguments.get("database")
            try:
                name, text, data = await explore(spec, arguments)
            except (ToolError, ServerBusyError, DataError) as error:
                return _failed(asked, error)
            return explore_result(name, text, data, ok=True)

        return call

    listing = declared(
        "list_tables", LIST_TABLES, object_schema(DATABASE), READ_ONLY, ExploreOutput
    )
    tools = exploring(limits.max_rows, limits.max_sample_rows)
    server.serve_tools(
        [
            AgentTool(listing, list_tables),
            *(
                engine_tool(spec, own_parameters(spec), ExploreOutput, calls_of(spec))
                for spec in tools
            ),
        ],
        output_schemas,
    )


def own_parameters(spec: ToolSpec) -> dict[str, dict[str, Any]]:
    """The explorer's parameters of a tool: its table (if it takes one) named as any file's,
    and the database."""
    return ({"table": TABLE} if "table" in spec.parameters["properties"] else {}) | DATABASE


def _failed(asked: Any, error: ToolError | ServerBusyError | DataError) -> CallToolResult:
    name = asked if isinstance(asked, str) else ""
    return explore_result(name, render.error_text(error), error_data(error), ok=False)
