"""Explorer mode leaves the user's folder as it found it, follows changes to the file, stays
inside a --db folder, and keeps schema-defined expressions within the call's bounds."""

import hashlib
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sdk_client import connect

from env_core.errors import DataError
from env_core.executor_limits import ExecutorLimits
from sqlenv_mcp.explorer import UserDatabases
from sqlenv_mcp.server import build_explorer_server

pytestmark = pytest.mark.anyio
TIMEOUT_S = 1.0
LIMITS = ExecutorLimits(timeout_s=TIMEOUT_S)


def folder_state(folder: Path) -> dict[str, str]:
    """Every file in the folder with the hash of its bytes."""
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.iterdir())
    }


def make_database(path: Path, script: str, journal: str = "DELETE") -> Path:
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA journal_mode = {journal}")
    connection.executescript(script)
    connection.commit()
    connection.close()
    return path


GARDEN = (
    "CREATE TABLE plant(id INTEGER PRIMARY KEY, name TEXT); "
    "INSERT INTO plant(name) VALUES ('tomato'), ('fern'), ('basil');"
)


def served(path: Path):
    databases = UserDatabases.from_path(path, LIMITS)
    return build_explorer_server(databases), databases


async def use_every_tool(client) -> None:
    for tool, arguments in [
        ("describe", {"table": "plant"}),
        ("sample", {"table": "plant"}),
        ("query", {"sql": "SELECT count(*) FROM plant"}),
    ]:
        result = await client.call_tool(tool, arguments)
        assert not result.isError, result.content[0].text
    listing = await client.read_resource("sqlenv://databases")
    assert "plant (3 rows)" in listing.contents[0].text


@pytest.mark.parametrize("journal", ["DELETE", "WAL", "TRUNCATE", "PERSIST"])
async def test_no_file_beside_the_database_is_created_or_changed(tmp_path, journal):
    make_database(tmp_path / "garden.sqlite", GARDEN, journal)
    if journal == "WAL":  # a WAL database whose writer has gone: no -wal, no -shm left
        assert sorted(os.listdir(tmp_path)) == ["garden.sqlite"]
    before = folder_state(tmp_path)
    server, databases = served(tmp_path / "garden.sqlite")
    async with connect(server) as client:
        await use_every_tool(client)
    databases.close()
    assert folder_state(tmp_path) == before


async def test_a_change_to_the_file_is_seen_at_the_next_call(tmp_path):
    path = make_database(tmp_path / "garden.sqlite", GARDEN)
    server, databases = served(path)
    async with connect(server) as client:
        missing = await client.call_tool("describe", {"table": "bed"})
        assert missing.isError and "tables are: plant" in missing.content[0].text
        time.sleep(0.01)  # a modification time the first read cannot share
        with sqlite3.connect(path) as writer:
            writer.executescript("CREATE TABLE bed(id INTEGER, sunny INTEGER);")
            writer.execute("INSERT INTO bed VALUES (1, 1)")
            writer.execute("INSERT INTO plant(name) VALUES ('mint')")
        writer.close()
        described = await client.call_tool("describe", {"table": "bed"})
        assert described.content[0].text.startswith("table bed: 1 rows")
        sampled = await client.call_tool("sample", {"table": "plant", "n": 10})
        assert [row[1] for row in sampled.structuredContent["data"]["rows"]][-1] == "mint"
        counted = await client.call_tool("query", {"sql": "SELECT count(*) FROM plant"})
        assert counted.structuredContent["data"]["rows"] == [[4]]
    databases.close()


async def test_a_link_out_of_the_folder_is_not_served(tmp_path, caplog):
    folder, outside = tmp_path / "served", tmp_path / "private"
    folder.mkdir()
    outside.mkdir()
    make_database(folder / "garden.sqlite", GARDEN)
    make_database(
        outside / "secret.sqlite", "CREATE TABLE secret(x); INSERT INTO secret VALUES (42);"
    )
    (folder / "secret.sqlite").symlink_to(outside / "secret.sqlite")
    (folder / "inside.sqlite").symlink_to(folder / "garden.sqlite")
    databases = UserDatabases.from_path(folder, ExecutorLimits())
    assert sorted(databases.files) == ["garden", "inside"]
    assert "secret.sqlite cannot be served: it leads out of the folder" in caplog.text
    async with connect(build_explorer_server(databases)) as client:
        refused = await client.call_tool(
            "query", {"sql": "SELECT * FROM secret", "database": "secret"}
        )
        assert refused.isError and "no database 'secret'" in refused.content[0].text
    databases.close()


SCHEMA_EXPRESSIONS = {
    # printf('%.*c') cannot be interrupted: it would run ~8 s past any deadline.
    "generated_column_printf": (
        "CREATE TABLE plant(id INTEGER PRIMARY KEY, name TEXT, "
        "label GENERATED ALWAYS AS (printf('%.*c', 250000000, 'x')) VIRTUAL); "
        "INSERT INTO plant(name) VALUES ('tomato'), ('fern'), ('basil');",
        "SELECT label FROM plant",
        "cannot run here",
    ),
    "view_printf": (
        GARDEN + "CREATE VIEW loud AS SELECT printf('%.*c', 250000000, 'x') AS noise FROM plant;",
        "SELECT noise FROM loud",
        "not allowed: FUNCTION printf",
    ),
    # Views that read the view before twice: the statement expands exponentially when prepared,
    # until it meets the memory budget (or, on a slow machine, the deadline).
    "view_chain": (
        GARDEN
        + "".join(
            f"CREATE VIEW v{level} AS SELECT a.x FROM v{level - 1} a, v{level - 1} b;"
            if level
            else "CREATE VIEW v0 AS SELECT 1 AS x;"
            for level in range(26)
        ),
        "SELECT count(*) FROM v25",
        "MiB of memory|time limit",
    ),
}


@pytest.mark.parametrize("case", SCHEMA_EXPRESSIONS, ids=list(SCHEMA_EXPRESSIONS))
async def test_schema_defined_expressions_stay_within_the_bounds(tmp_path, case):
    script, sql, phrase = SCHEMA_EXPRESSIONS[case]
    path = make_database(tmp_path / "garden.sqlite", script)
    before = folder_state(tmp_path)
    server, databases = served(path)
    async with connect(server) as client:
        for tool, arguments in [("query", {"sql": sql}), ("sample", {"table": "plant"})]:
            started = time.monotonic()
            result = await client.call_tool(tool, arguments)
            elapsed = time.monotonic() - started
            assert elapsed < TIMEOUT_S + 1.0, f"{tool} took {elapsed:.2f} s"
            if tool == "query" or case == "generated_column_printf":
                text = result.content[0].text
                assert result.isError and re.search(phrase, text), text
        healthy = await client.call_tool("query", {"sql": "SELECT count(*) FROM plant"})
        assert healthy.structuredContent["data"]["rows"] == [[3]]
    databases.close()
    assert folder_state(tmp_path) == before


CALLS = [
    ("list_tables", {}),
    ("describe", {"table": "plant"}),
    ("sample", {"table": "plant"}),
    ("query", {"sql": "SELECT * FROM plant"}),
]


async def refusals(client, database: str) -> list[str]:
    """Every tool's answer on `database`, each asserted an error; their texts."""
    texts = []
    for tool, arguments in CALLS:
        result = await client.call_tool(tool, {**arguments, "database": database})
        assert result.isError, (tool, result.content[0].text)
        texts.append(result.content[0].text)
    return texts


def interrupted_writer(path: Path, script: str) -> None:
    """Run `script` on `path` in a process that dies before it finishes (no checkpoint, no
    rollback), as a killed writer leaves a database."""
    program = (
        "import os, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        f"c.executescript({script!r})\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", program, str(path)], check=True)


@pytest.mark.parametrize("served_as", ["folder", "file"])
async def test_a_file_replaced_by_a_link_out_of_the_folder_is_refused(tmp_path, served_as):
    folder, outside = tmp_path / "served", tmp_path / "private"
    folder.mkdir()
    outside.mkdir()
    garden = make_database(folder / "garden.sqlite", GARDEN)
    secret = "CREATE TABLE plant(x); INSERT INTO plant VALUES (42);"
    make_database(outside / "secret.sqlite", secret)
    databases = UserDatabases.from_path(folder if served_as == "folder" else garden, LIMITS)
    async with connect(build_explorer_server(databases)) as client:
        await use_every_tool(client)
        garden.unlink()
        garden.symlink_to(outside / "secret.sqlite")
        texts = await refusals(client, "garden")
    databases.close()
    reason = "Error: garden.sqlite cannot be served: "
    reason += "it leads out of the folder served" if served_as == "folder" else "it leads out"
    assert all(text.startswith(reason) for text in texts), texts
    assert not any("42" in text or str(tmp_path) in text for text in texts)


async def test_a_deleted_file_is_not_served_from_its_open_handle(tmp_path):
    garden = make_database(tmp_path / "garden.sqlite", GARDEN)
    server, databases = served(garden)
    async with connect(server) as client:
        await use_every_tool(client)
        garden.unlink()
        texts = await refusals(client, "garden")
    databases.close()
    assert set(texts) == {"Error: garden.sqlite cannot be served: no such file or folder"}


def test_a_folder_serves_its_good_files_and_names_each_bad_ones_cause(tmp_path, caplog):
    make_database(tmp_path / "garden.sqlite", GARDEN)
    (tmp_path / "broken.sqlite").write_text("not a database")
    os.mkfifo(tmp_path / "pipe.sqlite")
    (tmp_path / "loop.sqlite").symlink_to(tmp_path / "loop.sqlite")
    (tmp_path / "gone.db").symlink_to(tmp_path / "nowhere.db")
    databases = UserDatabases.from_path(tmp_path, LIMITS)
    assert list(databases.files) == ["garden"]
    databases.close()
    for warning in [
        "broken.sqlite cannot be served: it is not a SQLite database, or it is damaged",
        "pipe.sqlite cannot be served: a FIFO (named pipe), not a file",
        "loop.sqlite cannot be served: a symbolic link loop",
        "gone.db cannot be served: no such file or folder",
    ]:
        assert f"--db: {warning}" in caplog.text
        lone = tmp_path / warning.split()[0]
        with pytest.raises(DataError, match=re.escape(warning)):
            UserDatabases.from_path(lone, LIMITS)


async def test_a_wal_database_with_changes_only_in_its_wal_is_refused_with_the_reason(tmp_path):
    garden = make_database(tmp_path / "garden.sqlite", GARDEN, journal="WAL")
    server, databases = served(garden)
    async with connect(server) as client:
        await use_every_tool(client)
        interrupted_writer(
            garden, "PRAGMA wal_autocheckpoint = 0; INSERT INTO plant(name) VALUES ('mint');"
        )
        assert (tmp_path / "garden.sqlite-wal").stat().st_size > 32
        texts = await refusals(client, "garden")
    databases.close()
    assert set(texts) == {
        "Error: garden.sqlite cannot be served: it is in WAL mode and its garden.sqlite-wal "
        "holds changes not yet in the file; checkpoint them (PRAGMA wal_checkpoint) or end "
        "the program writing it"
    }
    with pytest.raises(DataError, match="WAL mode"):
        UserDatabases.from_path(garden, LIMITS)


async def test_a_hot_journal_is_named_as_the_cause_and_the_file_served_once_recovered(tmp_path):
    garden = make_database(tmp_path / "garden.sqlite", GARDEN)
    server, databases = served(garden)
    async with connect(server) as client:
        await use_every_tool(client)
        time.sleep(0.01)  # a modification time the first read cannot share
        interrupted_writer(
            garden,
            "PRAGMA cache_size = 1; BEGIN; "
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) "
            "INSERT INTO plant(name) SELECT 'weed' FROM n; "
            "UPDATE plant SET name = upper(name);",
        )
        assert (tmp_path / "garden.sqlite-journal").stat().st_size > 0
        texts = await refusals(client, "garden")
        sqlite3.connect(garden).execute("SELECT count(*) FROM plant").fetchone()  # rolls back
        await use_every_tool(client)
    databases.close()
    assert set(texts) == {
        "Error: garden.sqlite cannot be served: a writer left an unfinished transaction in "
        "garden.sqlite-journal, which only a writer can roll back: open the database once "
        "with sqlite3 to recover it"
    }
