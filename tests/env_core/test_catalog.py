import json
import shutil
import sqlite3

import pytest

from env_core.catalog import Catalog
from env_core.errors import DataError, UnknownQuestionError
from env_core.layouts import detect_layout


@pytest.fixture
def tiny_data_dir(tmp_path):
    """A Spider-format directory with one database and one question of each fate."""
    db = tmp_path / "data" / "database" / "shop" / "shop.sqlite"
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as connection:
        connection.executescript(
            "CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, price REAL, note TEXT);"
            "INSERT INTO item(name, price) SELECT 'item' || value, value * 1.5 "
            "FROM (WITH RECURSIVE n(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM n "
            "WHERE value < 150) SELECT value FROM n);"
        )
    connection.close()
    questions = [
        ("shop", "How many items?", "SELECT count(*) FROM item"),
        ("shop", "Cheapest three, cheapest first?", "SELECT name FROM item ORDER BY price LIMIT 3"),
        ("shop", "Broken?", "SELECT nme FROM item"),
        ("shop", "Free items?", "SELECT name FROM item WHERE price = 0"),
        ("shop", "Notes?", "SELECT note FROM item LIMIT 5"),
        ("shop", "All names?", "SELECT name FROM item"),
        ("gone", "Anything?", "SELECT 1"),
        ("broken", "Anything?", "SELECT 1"),
    ]
    broken = tmp_path / "data" / "database" / "broken" / "broken.sqlite"
    broken.parent.mkdir()
    broken.write_bytes(b"this is not a SQLite file" * 100)
    records = [{"db_id": d, "question": q, "query": s} for d, q, s in questions]
    (tmp_path / "data" / "dev.json").write_text(json.dumps(records))
    return tmp_path / "data"


def test_every_question_is_kept_or_excluded_with_a_reason(tiny_data_dir, tmp_path):
    split = Catalog.load(tiny_data_dir, ["dev"], cache_dir=tmp_path / "cache").splits["dev"]
    assert [q.id for q in split.questions] == ["dev:0", "dev:1"]
    reasons = {e.id: e.reason for e in split.excluded}
    assert reasons == {
        "dev:2": "gold failed",
        "dev:3": "gold empty",
        "dev:4": "gold all NULL",
        "dev:5": "gold too large",
        "dev:6": "database missing",
        "dev:7": "database unreadable",
    }
    count, cheapest = split.questions
    assert (count.kind, count.gold.rows, count.hardness) == ("scalar", ((150,),), "easy")
    assert cheapest.gold.ordered and cheapest.kind == "list"
    assert cheapest.gold.rows == (("item1",), ("item2",), ("item3",))


def test_second_load_comes_from_the_cache_until_a_file_changes(tiny_data_dir, tmp_path):
    cache = tmp_path / "cache"
    first = Catalog.load(tiny_data_dir, ["dev"], cache_dir=cache).splits["dev"]
    second = Catalog.load(tiny_data_dir, ["dev"], cache_dir=cache).splits["dev"]
    assert (first.from_cache, second.from_cache) == (False, True)
    assert second.questions == first.questions and second.excluded == first.excluded
    refreshed = Catalog.load(tiny_data_dir, ["dev"], cache_dir=cache, refresh=True)
    assert not refreshed.splits["dev"].from_cache
    db = tiny_data_dir / "database" / "shop" / "shop.sqlite"
    with sqlite3.connect(db) as connection:
        connection.execute("DELETE FROM item WHERE id > 10")
    connection.close()
    changed = Catalog.load(tiny_data_dir, ["dev"], cache_dir=cache).splits["dev"]
    assert not changed.from_cache
    assert changed.questions[0].gold.rows == ((10,),)
    assert "dev:5" in [q.id for q in changed.questions]


def test_spider_splits_load_with_their_exclusions(spider_catalog, spider_dir, tmp_path):
    dev = spider_catalog.splits["dev_without_wta_1"]
    assert len(dev.questions) + len(dev.excluded) == 972
    assert dev.exclusion_counts()["gold empty"] == 49
    assert "database missing" not in dev.exclusion_counts()
    train = spider_catalog.splits["train_spider_min"]
    assert len(train.questions) + len(train.excluded) == 7000
    assert train.exclusion_counts()["database missing"] == 96
    assert train.exclusion_counts()["gold failed"] == 3
    assert {q.hardness for q in dev.questions} == {"easy", "medium", "hard", "extra"}
    assert detect_layout(spider_dir).question_file("train").name == "train_spider_min.json"


def test_full_dev_excludes_the_missing_wta_1_database(spider_dir, cache_dir):
    dev = Catalog.load(spider_dir, ["dev"], cache_dir=cache_dir).splits["dev"]
    missing = [e for e in dev.excluded if e.reason == "database missing"]
    assert len(missing) == 62 and {e.db_id for e in missing} == {"wta_1"}


def test_lookups(spider_catalog):
    question = spider_catalog.question("dev_without_wta_1:0")
    assert question.text == "How many singers do we have?"
    assert question.gold.rows == ((6,),)
    by_db = spider_catalog.questions("dev_without_wta_1", db_id="concert_singer")
    assert by_db and all(q.db_id == "concert_singer" for q in by_db)
    with pytest.raises(UnknownQuestionError, match="ids look like 'dev_without_wta_1:12'"):
        spider_catalog.question("dev:99999")
    with pytest.raises(UnknownQuestionError, match="not loaded"):
        spider_catalog.questions("test")
    with pytest.raises(UnknownQuestionError, match="no questions for database 'nope'"):
        spider_catalog.questions("dev_without_wta_1", db_id="nope")


def test_bad_data_directories_give_clear_errors(tmp_path, tiny_data_dir):
    with pytest.raises(DataError, match=r"no such directory: .*nowhere"):
        Catalog.load(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no database/ folder"):
        Catalog.load(tmp_path / "empty")
    with pytest.raises(DataError, match=r"no question file for split .test. in .*; available: dev"):
        Catalog.load(tiny_data_dir, ["test"], cache_dir=tmp_path / "cache")
    (tiny_data_dir / "broken.json").write_text('[{"db_id": "shop"}]')
    with pytest.raises(DataError, match="record 0: needs a string field"):
        Catalog.load(tiny_data_dir, ["broken"], cache_dir=tmp_path / "cache")
    shutil.rmtree(tiny_data_dir / "database")
    with pytest.raises(DataError, match="SQLENV_DATA_DIR"):
        Catalog.load(tiny_data_dir)
