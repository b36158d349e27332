"""Normal behaviour of the read-only executor on real Spider databases.

Expected values are checked against the database files with a plain `sqlite3` connection, so a
test states a fact about Spider, not about the executor's own output.
"""

import sqlite3
import threading
from pathlib import Path

import pytest

from env_core.errors import DataError, InvalidArgumentError, QueryFailedError, UnknownTableError
from env_core.executor import ReadOnlyExecutor
from env_core.executor_limits import ExecutorLimits
from env_core.render import Column, ForeignKey

CONCERT_TABLES = ("concert", "singer", "singer_in_concert", "stadium")


def db_path(spider_dir: Path, db_id: str) -> Path:
    return spider_dir / "database" / db_id / f"{db_id}.sqlite"


def raw(path: Path, sql: str) -> list[tuple]:
    """The answer straight from SQLite, read-only, for comparison."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def concert_path(spider_dir: Path) -> Path:
    return db_path(spider_dir, "concert_singer")


@pytest.fixture(scope="module")
def world_path(spider_dir: Path) -> Path:
    return db_path(spider_dir, "world_1")


@pytest.fixture(scope="module")
def concert(concert_path: Path):
    executor = ReadOnlyExecutor(concert_path)
    yield executor
    executor.close()


@pytest.fixture(scope="module")
def world(world_path: Path):
    executor = ReadOnlyExecutor(world_path)
    yield executor
    executor.close()


# --- tables and describe -----------------------------------------------------------------------


def test_tables_are_the_user_tables(concert, world) -> None:
    assert concert.tables == CONCERT_TABLES
    assert world.tables == ("city", "country", "countrylanguage")  # no sqlite_sequence


def test_describe_columns_types_and_primary_key(concert, concert_path: Path) -> None:
    schema = concert.describe("singer")
    assert schema.name == "singer"
    assert [c.name for c in schema.columns] == [
        *("Singer_ID", "Name", "Country", "Song_Name", "Song_release_year", "Age", "Is_male")
    ]
    assert [c.name for c in schema.columns if c.primary_key] == ["Singer_ID"]
    declared = raw(concert_path, "SELECT name, type FROM pragma_table_info('singer')")
    assert [(c.name, c.type) for c in schema.columns] == declared
    assert schema.columns[1] == Column("Name", "TEXT", primary_key=False, not_null=False)
    assert schema.foreign_keys == ()
    assert schema.row_count == 6 == raw(concert_path, "SELECT count(*) FROM singer")[0][0]


def test_describe_composite_key_and_foreign_keys(concert) -> None:
    schema = concert.describe("singer_in_concert")
    assert [c.name for c in schema.columns if c.primary_key] == ["concert_ID", "Singer_ID"]
    assert set(schema.foreign_keys) == {
        ForeignKey("Singer_ID", "singer", "Singer_ID"),
        ForeignKey("concert_ID", "concert", "concert_ID"),
    }
    assert schema.row_count == 10
    assert concert.describe("concert").foreign_keys == (
        ForeignKey("Stadium_ID", "stadium", "Stadium_ID"),
    )


def test_describe_not_null_and_counts_on_a_larger_database(world, world_path: Path) -> None:
    city = world.describe("city")
    assert all(c.not_null for c in city.columns)
    assert city.columns[0] == Column("ID", "INTEGER", primary_key=True, not_null=True)
    assert city.foreign_keys == (ForeignKey("CountryCode", "country", "Code"),)
    for table in world.tables:
        (count,) = raw(world_path, f"SELECT count(*) FROM {table}")[0]
        assert world.describe(table).row_count == count
    assert [world.describe(t).row_count for t in world.tables] == [4079, 239, 984]
    language = world.describe("countrylanguage")
    assert [c.name for c in language.columns if c.primary_key] == ["CountryCode", "Language"]


@pytest.mark.parametrize("name", ["SINGER", "Singer", "sInGeR", " singer "])
def test_table_names_resolve_case_insensitively(concert, name: str) -> None:
    assert concert.resolve_table(name) == "singer"
    assert concert.describe(name).name == "singer"
    assert concert.sample(name, 1).columns[0] == "Singer_ID"


def test_unknown_table_message_lists_the_tables(concert) -> None:
    with pytest.raises(UnknownTableError) as caught:
        concert.describe("singers")
    assert str(caught.value) == (
        "no such table: singers; tables are: concert, singer, singer_in_concert, stadium"
    )


# --- sample --------------------------------------------------------------------------------------


def test_sample_returns_the_first_rows(world, world_path: Path) -> None:
    result = world.sample("city", 5)
    assert result.columns == ("ID", "Name", "CountryCode", "District", "Population")
    assert list(result.rows) == raw(world_path, "SELECT * FROM city LIMIT 5")
    assert result.rows[0] == (1, "Kabul", "AFG", "Kabol", 1780000)
    assert result.truncated is False


def test_sample_default_is_five_rows(world) -> None:
    assert len(world.sample("country").rows) == 5


def test_sample_is_capped_to_max_sample_rows(world_path: Path) -> None:
    executor = ReadOnlyExecutor(world_path, ExecutorLimits(max_sample_rows=3))
    assert len(executor.sample("city", 1000).rows) == 3
    assert len(executor.sample("city", 2).rows) == 2
    executor.close()


def test_sample_of_a_small_table_returns_all_rows(concert) -> None:
    assert len(concert.sample("stadium", 20).rows) == 9


# --- query: truncation and caps ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "rows", "truncated"),
    [
        ("SELECT * FROM singer", 5, True),  # 6 rows, limit 5
        ("SELECT * FROM singer LIMIT 6", 5, True),
        ("SELECT * FROM singer LIMIT 5", 5, False),  # exactly the limit is not truncated
        ("SELECT * FROM singer LIMIT 4", 4, False),
        ("SELECT * FROM singer WHERE 0", 0, False),
    ],
)
def test_truncated_exactly_when_rows_exceed_the_limit(
    concert_path: Path, sql: str, rows: int, truncated: bool
) -> None:
    executor = ReadOnlyExecutor(concert_path, ExecutorLimits(max_rows=5))
    result = executor.query(sql)
    assert (len(result.rows), result.truncated) == (rows, truncated)
    executor.close()


def test_rows_come_back_in_order_with_column_names(concert, concert_path: Path) -> None:
    sql = "SELECT Name, Age FROM singer ORDER BY Age DESC"
    result = concert.query(sql)
    assert result.columns == ("Name", "Age")
    assert list(result.rows) == raw(concert_path, sql)


def test_max_rows_override(world) -> None:
    assert world.limits.max_rows == 20
    sql = "SELECT ID FROM city ORDER BY ID"
    wide = world.query(sql, max_rows=100)
    assert (len(wide.rows), wide.truncated) == (100, True)
    assert wide.rows[-1] == (100,)
    narrow = world.query("SELECT ID FROM city WHERE ID <= 3", max_rows=3)
    assert (len(narrow.rows), narrow.truncated) == (3, False)
    default = world.query(sql)
    assert (len(default.rows), default.truncated) == (20, True)


def test_result_char_cap_sets_truncated(world_path: Path) -> None:
    limits = ExecutorLimits(max_rows=500, max_result_chars=1_000)
    executor = ReadOnlyExecutor(world_path, limits)
    result = executor.query("SELECT Name, District FROM city ORDER BY ID")
    executor.close()
    assert result.truncated is True
    assert 0 < len(result.rows) < 500
    assert sum(len(cell) for row in result.rows for cell in row) <= 1_000


def test_long_text_cell_is_cut_with_a_marker(concert_path: Path) -> None:
    executor = ReadOnlyExecutor(concert_path, ExecutorLimits(max_cell_chars=50))
    (cell, short), *_ = executor.query("SELECT hex(zeroblob(100)), 'short'").rows
    executor.close()
    assert cell == "0" * 50 + "...[150 more chars]"
    assert short == "short"


def test_blob_cells_are_described_not_returned(concert) -> None:
    result = concert.query("SELECT zeroblob(10), x'0102', NULL, 1.5, 7")
    assert result.rows == (("<blob 10 bytes>", "<blob 2 bytes>", None, 1.5, 7),)


def test_elapsed_ms_is_reported(concert) -> None:
    for result in (concert.query("SELECT 1"), concert.sample("singer")):
        assert isinstance(result.elapsed_ms, float)
        assert 0 <= result.elapsed_ms < 5_000


# --- errors an agent can act on ------------------------------------------------------------------


def test_no_such_table_lists_the_tables(concert) -> None:
    with pytest.raises(QueryFailedError) as caught:
        concert.query("SELECT * FROM singers")
    assert str(caught.value) == (
        "no such table: singers; tables are: concert, singer, singer_in_concert, stadium"
    )


def test_no_such_column_points_to_describe(concert) -> None:
    with pytest.raises(QueryFailedError) as caught:
        concert.query("SELECT singer_name FROM singer")
    assert str(caught.value).startswith("no such column: singer_name")
    assert "describe(table)" in str(caught.value)


def test_syntax_error_is_a_query_failure(concert) -> None:
    with pytest.raises(QueryFailedError, match="syntax error"):
        concert.query("SELEC Name FROM singer")
    assert concert.query("SELECT count(*) FROM singer").rows == ((6,),)


# --- concurrency ---------------------------------------------------------------------------------


def test_one_executor_from_four_threads(world, world_path: Path) -> None:
    """Calls from several threads are serialised and each gets its own correct answer."""
    queries = [f"SELECT count(*), sum(Population) FROM city WHERE ID % 4 = {i}" for i in range(4)]
    expected = [tuple(raw(world_path, sql)) for sql in queries]
    sample_expected = tuple(raw(world_path, "SELECT * FROM city LIMIT 3"))
    barrier = threading.Barrier(4)
    failures: list[str] = []

    def worker(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            for _ in range(40):
                if world.query(queries[i]).rows != expected[i]:
                    failures.append(f"thread {i}: wrong query result")
                if world.sample("city", 3).rows != sample_expected:
                    failures.append(f"thread {i}: wrong sample")
                if world.describe("CITY").row_count != 4079:
                    failures.append(f"thread {i}: wrong describe")
        except Exception as error:  # collected and asserted in the main thread
            failures.append(f"thread {i}: {type(error).__name__}: {error}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []


# --- opening files -------------------------------------------------------------------------------


def test_missing_file_raises_data_error_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "missing.sqlite"
    with pytest.raises(DataError, match="not found"):
        ReadOnlyExecutor(missing)
    assert not missing.exists() and not missing.parent.exists()
    missing_here = tmp_path / "missing.sqlite"
    with pytest.raises(DataError):
        ReadOnlyExecutor(missing_here)
    assert list(tmp_path.iterdir()) == []


def test_non_sqlite_file_raises_data_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.sqlite"
    path.write_bytes(b"this is not a database\n" * 200)
    with pytest.raises(DataError, match="SQLite database"):
        ReadOnlyExecutor(path)
    assert path.read_bytes() == b"this is not a database\n" * 200
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.sqlite"]


def test_directory_is_not_a_database(tmp_path: Path) -> None:
    with pytest.raises(DataError):
        ReadOnlyExecutor(tmp_path)


@pytest.mark.parametrize("max_rows", [-1, True])
def test_invalid_max_rows_is_refused(concert, max_rows) -> None:
    with pytest.raises(InvalidArgumentError):
        concert.query("SELECT * FROM singer", max_rows=max_rows)
