"""Every text a tool or an error returns, and the structured data beside it, is bounded by the
budget of a result, however many tables or columns a database has, each cut with a note saying
what was cut: in the engine, through the MCP episode server and through explorer mode."""

import contextlib
import json
import sqlite3

import pytest
from mcp.shared.memory import create_connected_server_and_client_session as connect

from env_core.catalog import Catalog
from env_core.executor import ReadOnlyExecutor
from env_core.executor_limits import ExecutorLimits
from env_core.manager import EpisodeManager, SessionConfig
from env_core.read_only import quote_identifier
from sqlenv_mcp.episodes import Connections
from sqlenv_mcp.explorer import UserDatabases
from sqlenv_mcp.server import build_episode_server, build_explorer_server

MAX_TEXT_CHARS = 64_000  # the budget of a result (ExecutorLimits.max_result_chars)
TABLES = 2_000
WIDE_COLUMNS = 1_990
# Long names, each with a quote that JSON escapes.
WIDE_NAME = "w" * 200
COLUMN = 'c"' + "x" * 1_000
MANY_TABLES = " more tables: "
ALL_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' lists them"
# What a step adds to a tool's text ("[N steps left]").
STEP_NOTE_CHARS = 30


def vast_database(path) -> None:
    """2,000 tables with long names, and one table of 1,990 columns with long names."""
    tables = [f'CREATE TABLE "{WIDE_NAME}{n:05}" (id INTEGER);' for n in range(TABLES)]
    columns = ", ".join(f"{quote_identifier(f'{COLUMN}{n}')} TEXT" for n in range(WIDE_COLUMNS))
    with contextlib.closing(sqlite3.connect(path)) as connection:
        script = f"BEGIN; {' '.join(tables)} CREATE TABLE wide ({columns}); COMMIT;"
        connection.executescript(script)


@pytest.fixture(scope="module")
def vast(tmp_path_factory):
    root = tmp_path_factory.mktemp("vast")
    db = root / "database" / "vast" / "vast.sqlite"
    db.parent.mkdir(parents=True)
    vast_database(db)
    records = [{"db_id": "vast", "question": "How wide?", "query": "SELECT count(*) FROM wide"}]
    (root / "dev.json").write_text(json.dumps(records))
    return root


@pytest.fixture(scope="module")
def sessions(vast, tmp_path_factory):
    catalog = Catalog.load(vast, cache_dir=tmp_path_factory.mktemp("cache"))
    manager = EpisodeManager(catalog, SessionConfig(max_steps=50))
    yield manager
    manager.shutdown()


def assert_bounded(text: str, data: dict) -> None:
    assert len(text) <= MAX_TEXT_CHARS + STEP_NOTE_CHARS, f"{len(text):,} characters of text"
    size = len(json.dumps(data, ensure_ascii=False))
    assert size <= MAX_TEXT_CHARS, f"{size:,} characters of structured data"


def test_the_opening_lists_the_tables_that_fit_and_how_to_see_the_rest(sessions):
    start = sessions.create(question_id="dev:0").start
    assert_bounded(start.text, start.to_dict() | {"text": ""})
    assert MANY_TABLES in start.text and ALL_TABLES in start.text
    assert 0 < len(start.tables) < TABLES and start.tables[0] in start.text


def test_tool_texts_and_errors_on_a_vast_database_are_bounded(sessions):
    episode = sessions.create(question_id="dev:0")
    for tool, arguments in [
        ("describe", {"table": "no_such_table"}),
        ("sample", {"table": "no_such_table"}),
        ("query", {"sql": "SELECT * FROM no_such_table"}),
    ]:
        result = episode.call(tool, arguments)
        assert not result.ok and "no such table" in result.text
        assert_bounded(result.text, result.data)
        assert MANY_TABLES in result.text and ALL_TABLES in result.text
        assert len(result.text) < 5_000, "an error lists a few thousand characters of tables"
    described = episode.call("describe", {"table": "wide"})
    assert described.ok and described.data["truncated"] is True
    assert_bounded(described.text, described.data)
    assert "more columns, not shown: a description holds at most 64,000 characters" in (
        described.text
    )
    assert len(described.data["columns"]) == described.text.count(" TEXT")
    sampled = episode.call("sample", {"table": "wide"})
    assert_bounded(sampled.text, sampled.data)


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_the_mcp_episode_server_sends_bounded_texts(sessions):
    async with connect(build_episode_server(sessions, connections=Connections(sessions))) as client:
        start = await client.call_tool("start_episode", {"question_id": "dev:0"})
        assert_bounded(start.content[0].text, start.structuredContent)
        assert ALL_TABLES in start.content[0].text
        for tool, arguments in [("describe", {"table": "nope"}), ("describe", {"table": "wide"})]:
            result = await client.call_tool(tool, arguments)
            assert_bounded(result.content[0].text, result.structuredContent)


@pytest.mark.anyio
async def test_explorer_texts_are_bounded(vast):
    path = vast / "database" / "vast" / "vast.sqlite"
    databases = UserDatabases.from_path(path, ExecutorLimits(timeout_s=2.0))
    try:
        async with connect(build_explorer_server(databases)) as client:
            listing = await client.call_tool("list_tables", {})
            assert_bounded(listing.content[0].text, listing.structuredContent)
            assert ALL_TABLES in listing.content[0].text
            resource = await client.read_resource("sqlenv://databases")
            assert len(resource.contents[0].text) <= MAX_TEXT_CHARS
            for tool, arguments in [
                ("describe", {"table": "nope"}),
                ("query", {"sql": "SELECT 1 FROM nope"}),
                ("describe", {"table": "wide"}),
                ("sample", {"table": "wide"}),
            ]:
                result = await client.call_tool(tool, arguments)
                assert_bounded(result.content[0].text, result.structuredContent)
    finally:
        databases.close()


# Cells JSON writes longer than the text shows them: quotes and backslashes twice as long,
# control characters as \u0001 (the text: \x01).
ESCAPED_IN_JSON = {"quotes": '"', "backslashes": "\\", "controls": "\x01"}


def escaped_cells(path, char: str):
    """40 rows of five 500-character cells of `char`."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE t (a TEXT, b TEXT, c TEXT, d TEXT, e TEXT)")
        connection.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", [(char * 500,) * 5] * 40)
        connection.commit()
    return path


def rows_json_chars(data: dict) -> int:
    return len(json.dumps({k: data[k] for k in ("columns", "rows")}, ensure_ascii=False))


@pytest.mark.parametrize("char", ESCAPED_IN_JSON.values(), ids=list(ESCAPED_IN_JSON))
def test_the_structured_rows_are_counted_in_the_budget(tmp_path, char):
    from env_core.render import rows_data

    executor = ReadOnlyExecutor(escaped_cells(tmp_path / "cells.sqlite", char))
    result = executor.query("SELECT * FROM t")
    assert result.rows and result.truncated
    assert rows_json_chars(rows_data(result)) <= MAX_TEXT_CHARS
    assert len(result.text) <= MAX_TEXT_CHARS + STEP_NOTE_CHARS
    executor.close()


@pytest.mark.anyio
@pytest.mark.parametrize("char", ESCAPED_IN_JSON.values(), ids=list(ESCAPED_IN_JSON))
async def test_explorer_sends_structured_rows_within_the_budget(tmp_path, char):
    path = escaped_cells(tmp_path / "cells.sqlite", char)
    databases = UserDatabases.from_path(path, ExecutorLimits(timeout_s=2.0))
    try:
        async with connect(build_explorer_server(databases)) as client:
            for tool, arguments in [
                ("query", {"sql": "SELECT * FROM t"}),
                ("sample", {"table": "t"}),
            ]:
                result = await client.call_tool(tool, arguments)
                assert not result.isError, result.content[0].text
                assert rows_json_chars(result.structuredContent["data"]) <= MAX_TEXT_CHARS
    finally:
        databases.close()
