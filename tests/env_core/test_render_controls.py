"""Control characters in names and values never reach a terminal raw.

A database can name a table or column, or hold a value, with ANSI/OSC escape sequences (set the
terminal title, recolour the screen) and other C0/C1 controls. The text renderings show them
escaped; the structured data keeps them exact.
"""

import contextlib
import json
import sqlite3

import pytest

from env_core import render
from env_core.catalog import Catalog
from env_core.manager import EpisodeManager, SessionConfig
from env_core.render import Column, ForeignKey, QueryResult, TableSchema

TITLE = "\x1b]0;pwned\x07"  # OSC: set the terminal's title
RED = "\x1b[31m"  # CSI: switch to red
TABLE = f"t{TITLE}"
COLUMN = f"c{RED}"
VALUE = f"v{TITLE}{RED}\x9b2J\r\x00"  # also a C1 CSI (clear screen), CR and NUL
SHOWN_TABLE = "t\\x1b]0;pwned\\x07"
SHOWN_COLUMN = "c\\x1b[31m"
SHOWN_VALUE = "v\\x1b]0;pwned\\x07\\x1b[31m\\x9b2J\\x0d\\x00"


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    root = tmp_path_factory.mktemp("controls")
    db = root / "database" / "odd" / "odd.sqlite"
    db.parent.mkdir(parents=True)
    with contextlib.closing(sqlite3.connect(db)) as connection:
        connection.execute(f'CREATE TABLE "{TABLE}" (id INTEGER PRIMARY KEY, "{COLUMN}" TEXT)')
        connection.execute(f'CREATE TABLE "ref{RED}" (id INTEGER REFERENCES "{TABLE}"(id))')
        connection.execute(f'INSERT INTO "{TABLE}" VALUES (1, ?), (2, ?)', (VALUE, "a|b\nc\td"))
        connection.execute(f'INSERT INTO "ref{RED}" VALUES (1)')
        connection.commit()
    records = [
        {"db_id": "odd", "question": "How many rows?", "query": f'SELECT count(*) FROM "{TABLE}"'}
    ]
    (root / "dev.json").write_text(json.dumps(records))
    catalog = Catalog.load(root, cache_dir=tmp_path_factory.mktemp("cache"))
    manager = EpisodeManager(catalog, SessionConfig(max_steps=50))
    yield manager
    manager.shutdown()


@pytest.fixture
def episode(sessions):
    return sessions.create(question_id="dev:0")


def assert_no_controls(text: str) -> None:
    controls = [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0]
    assert controls == []


def test_the_opening_lists_escaped_table_names(episode):
    start = episode.start
    assert f"Tables: ref\\x1b[31m, {SHOWN_TABLE}" in start.text
    assert_no_controls(start.text)
    assert start.tables == (f"ref{RED}", TABLE)


def test_describe_escapes_table_column_and_key_names(episode):
    result = episode.call("describe", {"table": TABLE})
    assert result.ok
    assert result.text.startswith(f"table {SHOWN_TABLE}: 2 rows\ncolumns:\n  id INTEGER")
    assert f"  {SHOWN_COLUMN} TEXT" in result.text
    assert_no_controls(result.text)
    assert result.data["table"] == TABLE
    assert [c["name"] for c in result.data["columns"]] == ["id", COLUMN]
    keys = episode.call("describe", {"table": f"ref{RED}"})
    assert f"  id -> {SHOWN_TABLE}.id" in keys.text
    assert_no_controls(keys.text)
    assert keys.data["foreign_keys"] == [{"column": "id", "ref_table": TABLE, "ref_column": "id"}]


def test_sample_and_query_escape_names_and_values(episode):
    sample = episode.call("sample", {"table": TABLE})
    query = episode.call("query", {"sql": f'SELECT "{COLUMN}" AS "{TITLE}" FROM "{TABLE}"'})
    for result, header in ((sample, f"id | {SHOWN_COLUMN}"), (query, "\\x1b]0;pwned\\x07")):
        lines = result.text.splitlines()
        assert lines[0] == header
        assert lines[1].endswith(SHOWN_VALUE)
        assert lines[2].endswith("a\\|b\\nc\td")  # pipe and newline as before; tab kept
        assert_no_controls(result.text)
    assert sample.data["columns"] == ["id", COLUMN]
    assert sample.data["rows"] == [[1, VALUE], [2, "a|b\nc\td"]]
    assert query.data["columns"] == [TITLE]
    assert query.data["rows"] == [[VALUE], ["a|b\nc\td"]]


def test_the_unknown_table_error_escapes_the_name_given_and_the_names_listed(episode):
    result = episode.call("describe", {"table": f"nope{TITLE}{RED}"})
    assert not result.ok
    assert result.text.startswith(
        f"Error: no such table: nope{SHOWN_TABLE[1:]}\\x1b[31m; tables are: ref\\x1b[31m, "
        f"{SHOWN_TABLE}"
    )
    assert_no_controls(result.text)
    assert_no_controls(result.data["message"])


def test_ordinary_text_is_rendered_as_before():
    result = QueryResult(("name", "a || b"), (("Zoë", 1.5), ("x|y", None), ("é\tz", 3)), False, 0)
    assert render.rows_text(result).splitlines() == [
        "name | a || b",
        "Zoë | 1.5",
        "x\\|y | NULL",
        "é\tz | 3",
        "(3 rows)",
    ]
    assert render.visible("plain text, ü, 中文, \u00a0") == "plain text, ü, 中文, \u00a0"


def test_newlines_and_controls_in_names_are_escaped_in_ascii_and_other_text():
    columns = (Column("a\nb", "TEXT", False, False), Column("é\x1b[31m", "", True, True))
    schema = TableSchema("Zoë\r", columns, (ForeignKey("a\nb", "t\x9b", None),), 3)
    assert render.schema_text(schema).splitlines() == [
        "table Zoë\\x0d: 3 rows",
        "columns:",
        "  a\\nb TEXT",
        "  é\\x1b[31m untyped primary key not null",
        "foreign keys:",
        "  a\\nb -> t\\x9b.(primary key)",
    ]
    plain = TableSchema("t", (Column("a", "INT", True, False),), (), 1)
    assert render.schema_text(plain) == "table t: 1 rows\ncolumns:\n  a INT primary key"
    split_name = TableSchema("t", (Column("x\ny", "INT", False, False),), (), 1)
    assert render.schema_text(split_name) == "table t: 1 rows\ncolumns:\n  x\\ny INT"
