"""Explorer mode on a user's own SQLite files: read-only tools, nothing written."""

import hashlib
import sqlite3

import pytest
from sdk_client import connect

from env_core.errors import DataError
from env_core.executor_limits import ExecutorLimits
from env_core.tools import exploring
from sqlenv_mcp.explorer import DATABASE, TABLE, UserDatabases
from sqlenv_mcp.server import build_explorer_server

pytestmark = pytest.mark.anyio


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def user_db(tmp_path):
    path = tmp_path / "garden.sqlite"
    with sqlite3.connect(path) as connection:
        connection.executescript(
            "CREATE TABLE plant(id INTEGER PRIMARY KEY, name TEXT NOT NULL, bed INTEGER "
            "REFERENCES bed(id)); CREATE TABLE bed(id INTEGER PRIMARY KEY, sunny INTEGER);"
            "INSERT INTO bed VALUES (1, 1), (2, 0);"
            "INSERT INTO plant(name, bed) VALUES ('tomato', 1), ('fern', 2), ('basil', 1);"
        )
    connection.close()
    return path


def served(path):
    return build_explorer_server(UserDatabases.from_path(path, ExecutorLimits()))


async def test_describe_sample_query_on_a_user_file(user_db):
    before = digest(user_db)
    async with connect(served(user_db)) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert tools == {"list_tables", "describe", "sample", "query"}
        listed = await client.call_tool("list_tables", {})
        assert listed.content[0].text == "garden: bed (2 rows), plant (3 rows)"
        assert listed.structuredContent["data"] == {"databases": {"garden": {"bed": 2, "plant": 3}}}
        described = await client.call_tool("describe", {"table": "plant"})
        assert described.content[0].text.startswith("table plant: 3 rows")
        assert "  bed -> bed.id" in described.content[0].text
        sampled = await client.call_tool("sample", {"table": "plant", "n": 2})
        assert sampled.structuredContent["data"]["rows"] == [[1, "tomato", 1], [2, "fern", 2]]
        queried = await client.call_tool(
            "query", {"sql": "SELECT name FROM plant JOIN bed ON bed.id = plant.bed WHERE sunny"}
        )
        assert queried.structuredContent == {
            "database": "garden",
            "ok": True,
            "data": queried.structuredContent["data"],
        }
        assert queried.structuredContent["data"]["rows"] == [["tomato"], ["basil"]]
        listing = await client.read_resource("sqlenv://databases")
        assert listing.contents[0].text == "garden: bed (2 rows), plant (3 rows)"
    assert digest(user_db) == before


async def test_the_tools_are_the_engines_that_explore_with_their_schemas(user_db):
    """list_tables, then every tool of the engine's table but the answer, in the table's
    order, each declared by the engine's schema with the explorer's own parameters."""
    limits = ExecutorLimits(max_rows=7, max_sample_rows=9)
    server = build_explorer_server(UserDatabases.from_path(user_db, limits))
    async with connect(server) as client:
        listed = (await client.list_tools()).tools
    specs = exploring(7, 9)
    assert [tool.name for tool in listed] == ["list_tables", *(spec.name for spec in specs)]
    for tool, spec in zip(listed[1:], specs, strict=True):
        assert tool.description == spec.description
        properties = spec.parameters["properties"]
        own = {"table": TABLE} if "table" in properties else {}
        assert tool.inputSchema == {
            **spec.parameters,
            "properties": {**properties, **own, **DATABASE},
        }
        assert tool.annotations.readOnlyHint is True
    assert listed[0].inputSchema == {
        "type": "object",
        "properties": DATABASE,
        "additionalProperties": False,
    }
    assert "at most 7 rows" in listed[3].description
    assert listed[2].inputSchema["properties"]["n"]["maximum"] == 9


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM plant",
        "UPDATE plant SET name = 'x'",
        "DROP TABLE plant",
        "CREATE TABLE weed(x)",
        "ATTACH 'other.db' AS other",
        "PRAGMA journal_mode = DELETE",
        "VACUUM",
        "WITH gone AS (SELECT 1) DELETE FROM plant",
        "SELECT 1; DELETE FROM plant",
    ],
)
async def test_writes_are_rejected_and_the_file_is_unchanged(user_db, sql):
    before = digest(user_db)
    async with connect(served(user_db)) as client:
        result = await client.call_tool("query", {"sql": sql})
        assert result.isError
        assert result.content[0].text.startswith("Error: ")
        assert result.structuredContent["data"]["error"] == "query_rejected"
    assert digest(user_db) == before
    assert sorted(p.name for p in user_db.parent.iterdir()) == ["garden.sqlite"]


async def test_views_are_described_by_their_definition_and_read_in_the_sandbox(user_db):
    with sqlite3.connect(user_db) as connection:
        connection.execute(
            "CREATE VIEW sunny_plants AS SELECT plant.name FROM plant "
            "JOIN bed ON bed.id = plant.bed WHERE sunny"
        )
    connection.close()
    async with connect(served(user_db)) as client:
        listed = await client.call_tool("list_tables", {"database": "garden"})
        assert listed.content[0].text.endswith("sunny_plants (view)")
        described = await client.call_tool("describe", {"table": "sunny_plants"})
        assert described.content[0].text.splitlines()[:3] == [
            "view sunny_plants: sample or query it to see its columns",
            "definition:",
            "  CREATE VIEW sunny_plants AS SELECT plant.name FROM plant "
            "JOIN bed ON bed.id = plant.bed WHERE sunny",
        ]
        sampled = await client.call_tool("sample", {"table": "sunny_plants"})
        assert sampled.structuredContent["data"]["rows"] == [["tomato"], ["basil"]]


async def test_tables_created_after_start_are_seen(user_db):
    async with connect(served(user_db)) as client:
        with sqlite3.connect(user_db) as connection:
            connection.execute("CREATE TABLE seed(id INTEGER, kind TEXT)")
        connection.close()
        listed = await client.call_tool("list_tables", {})
        assert "seed (0 rows)" in listed.content[0].text
        assert not (await client.call_tool("describe", {"table": "seed"})).isError


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        (
            "describe",
            {"table": "plant", "rows": 3},
            "describe does not take 'rows'; it takes: table",
        ),
        ("sample", {"table": "plant", "n": "two"}, "sample: n must be a whole number from 1 to 20"),
        ("query", {"sql": 42}, "query: sql must be a string"),
        ("list_tables", {"database": 7}, "database must be a string, not 7"),
        (
            "list_tables",
            {"verbose": True},
            "list_tables does not take 'verbose'; it takes: nothing",
        ),
    ],
)
async def test_argument_mistakes_are_answered_in_the_engines_words(
    user_db, tool, arguments, message
):
    async with connect(served(user_db)) as client:
        result = await client.call_tool(tool, arguments)
    assert result.isError and result.content[0].text == f"Error: {message}"
    assert result.structuredContent["data"]["error"] == "invalid_argument"


async def test_a_folder_serves_each_file_by_name(user_db, tmp_path):
    second = tmp_path / "notes.db"
    with sqlite3.connect(second) as connection:
        connection.execute("CREATE TABLE note(text TEXT)")
    connection.close()
    async with connect(served(tmp_path)) as client:
        ambiguous = await client.call_tool("query", {"sql": "SELECT 1"})
        assert ambiguous.isError and "name one: garden, notes" in ambiguous.content[0].text
        named = await client.call_tool("describe", {"table": "note", "database": "notes"})
        assert not named.isError and named.structuredContent["database"] == "notes"
        unknown = await client.call_tool("query", {"sql": "SELECT 1", "database": "x"})
        assert "no database 'x'; databases are: garden, notes" in unknown.content[0].text


def test_bad_paths_fail_at_start_up(tmp_path):
    with pytest.raises(DataError, match="no such file or folder"):
        UserDatabases.from_path(tmp_path / "missing.sqlite", ExecutorLimits())
    with pytest.raises(DataError, match="the folder has no"):
        UserDatabases.from_path(tmp_path, ExecutorLimits())
    (tmp_path / "fake.sqlite").write_text("not a database")
    with pytest.raises(DataError, match="cannot be served: it is not a SQLite database"):
        UserDatabases.from_path(tmp_path / "fake.sqlite", ExecutorLimits())
