"""Dataset layouts read from their folders: BIRD (a fixture this project writes), Spider-Syn
and Spider-DK (the real releases beside Spider)."""

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from env_core.catalog import Catalog
from env_core.errors import DataError
from env_core.factory import open_manager
from env_core.oracle import play_oracle
from env_core.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def shared_data(name: str) -> Path:
    path = (ROOT / ".." / "shared" / "data" / name).resolve()
    if not path.is_dir():
        pytest.fail(f"{name} data directory not found at {path}; the tests need it there")
    return path


def write_fixture(layout: str, folder: Path) -> Path:
    script = ROOT / "scripts" / "dataset_fixtures.py"
    subprocess.run([sys.executable, str(script), layout, str(folder)], check=True, timeout=60)
    return folder


def sqlenv(*args: str, cache_dir: Path) -> str:
    command = [sys.executable, "-m", "env_core.cli", *args, "--cache-dir", str(cache_dir)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)
    return done.stdout


def oracle_success(settings: Settings) -> tuple[int, int]:
    manager = open_manager(settings)
    try:
        questions = manager.catalog.questions(settings.split)
        solved = 0
        for question in questions:
            episode = manager.create(question_id=question.id)
            play_oracle(episode)
            solved += bool(episode.correct)
            manager.close(episode.episode_id)
        return solved, len(questions)
    finally:
        manager.shutdown()


@pytest.fixture(scope="module")
def bird_dir(tmp_path_factory) -> Path:
    return write_fixture("bird", tmp_path_factory.mktemp("data") / "bird")


def test_a_bird_folder_is_read_with_its_difficulty_and_exclusions(bird_dir, cache_dir):
    out = sqlenv("data", "prepare", "--data-dir", str(bird_dir), cache_dir=cache_dir)
    assert "(bird layout)" in out
    assert "split dev (dev.json): 6 questions, 4 kept, 2 excluded" in out
    assert "kept by hardness: simple 2, moderate 1, challenging 1" in out
    assert "excluded, gold empty: 1" in out
    assert "excluded, database missing: 1" in out


def test_bird_evidence_is_shown_with_the_question_unless_turned_off(bird_dir, cache_dir):
    settings = Settings(data_dir=str(bird_dir), cache_dir=str(cache_dir))
    for evidence, shown in ((True, True), (False, False)):
        manager = open_manager(settings.replace(evidence=evidence))
        try:
            episode = manager.create(question_id="dev:0")
            assert episode.question.dataset == "bird"
            text = episode.start.text
            assert text.startswith("Question: How many schools are there in Kent?\n")
            assert ("Evidence: Kent refers to county = 'Kent'\n" in text) is shown
        finally:
            manager.shutdown()


def test_the_oracle_solves_every_kept_bird_question(bird_dir, cache_dir):
    settings = Settings(data_dir=str(bird_dir), cache_dir=str(cache_dir))
    assert oracle_success(settings) == (4, 4)


def test_spider_syn_serves_the_rewritten_questions_on_spiders_databases(cache_dir):
    spider_syn = shared_data("spider-syn")
    with pytest.raises(DataError, match="--databases-dir"):
        Catalog.load(spider_syn, ["dev"], cache_dir=cache_dir)
    databases = shared_data("spider") / "database"
    catalog = Catalog.load(spider_syn, ["dev"], cache_dir=cache_dir, databases_dir=databases)
    dev = catalog.splits["dev"]
    assert catalog.layout.dataset == "spider-syn"
    assert len(dev.questions) + len(dev.excluded) == 1034
    assert dev.exclusion_counts()["database missing"] == 62  # wta_1 has no database
    assert dev.questions[0].text == "How many vocalists do we have?"
    assert {q.dataset for q in dev.questions} == {"spider-syn"}


def test_the_oracle_solves_every_kept_spider_dk_question(cache_dir):
    settings = Settings(
        data_dir=str(shared_data("spider-dk")),
        databases_dir=str(shared_data("spider") / "database"),
        split="Spider-DK",
        cache_dir=str(cache_dir),
    )
    manager = open_manager(settings)
    split = manager.catalog.splits["Spider-DK"]
    manager.shutdown()
    assert len(split.questions) + len(split.excluded) == 535
    assert split.exclusion_counts()["database missing"] == 62
    assert {q.hardness for q in split.questions} >= {"type 0", "type 1", "type 2"}
    assert manager.catalog.database_path("new_pets_1").is_relative_to(settings.data_dir)
    solved, kept = oracle_success(settings)
    assert solved == kept == len(split.questions)


def test_describe_shows_birds_column_descriptions_compactly(bird_dir, cache_dir):
    manager = open_manager(Settings(data_dir=str(bird_dir), cache_dir=str(cache_dir)))
    try:
        episode = manager.create(question_id="dev:0")
        text = episode.call("describe", {"table": "Grants"}).text
    finally:
        manager.shutdown()
    lines = text.splitlines()
    assert "  id INTEGER primary key" in lines  # nothing said of it, nothing shown
    assert "  year INTEGER  -- financial year the grant was paid" in lines
    assert "  amount REAL  -- grant in pounds; values: 0 means the grant was withdrawn" in lines


def test_data_check_lists_why_each_question_of_your_own_folder_is_excluded(tmp_path, cache_dir):
    folder = tmp_path / "own"
    (folder / "databases").mkdir(parents=True)
    with sqlite3.connect(folder / "databases" / "shop.db") as connection:
        connection.executescript("CREATE TABLE items (name TEXT, price REAL);")
        connection.execute("INSERT INTO items VALUES ('pen', 1.5), ('ink', 4.25)")
    connection.close()
    records = [
        {"db_id": "shop", "question": "How many items?", "sql": "SELECT COUNT(*) FROM items"},
        {"db_id": "shop", "question": "Price of ink?", "sql": "SELECT cost FROM items"},
        {"db_id": "depot", "question": "Any?", "sql": "SELECT 1", "difficulty": "easy"},
    ]
    (folder / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "more.csv").write_text(
        "db_id,question,sql,evidence,difficulty\n"
        "shop,Dearest item?,SELECT name FROM items ORDER BY price DESC LIMIT 1,dearest = max price,"
        "hard\n"
    )
    out = sqlenv("data", "check", "--data-dir", str(folder), cache_dir=cache_dir)
    assert "(own layout)" in out
    assert "split questions (questions.jsonl): 3 questions, 1 kept, 2 excluded" in out
    assert "  - questions:1 (shop) gold failed: no such column: cost" in out
    assert "  - questions:2 (depot) database missing: no file depot.sqlite" in out
    assert "split more (more.csv): 1 questions, 1 kept, 0 excluded" in out
    settings = Settings(data_dir=str(folder), split="more", cache_dir=str(cache_dir))
    assert oracle_success(settings) == (1, 1)


def test_your_own_questions_may_give_the_gold_answer_instead_of_sql(tmp_path, cache_dir):
    folder = tmp_path / "own"
    folder.mkdir()
    with sqlite3.connect(folder / "shop.sqlite") as connection:
        connection.executescript("CREATE TABLE items (name TEXT, price REAL);")
        connection.execute("INSERT INTO items VALUES ('pen', 1.5), ('ink', 4.25)")
    connection.close()
    records = [
        {"db_id": "shop", "question": "How many items?", "answer": 2},
        {"db_id": "shop", "question": "Which items?", "answer": ["pen", "ink"]},
        {"db_id": "shop", "question": "Prices?", "answer": [["pen", 1.5], ["ink", 4.25]]},
        {"db_id": "shop", "question": "Colour?", "answer": {"colour": "blue"}},
        {"db_id": "shop", "question": "Nothing?", "answer": []},
    ]
    (folder / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "typed.csv").write_text(
        "db_id,question,answer,difficulty\n"
        "shop,Dearest item?,ink,hard\n"
        "shop,Cheapest price?,1.5,easy\n"
        'shop,Both?,"[""pen"", ""ink""]",\n'
    )
    out = sqlenv("data", "check", "--data-dir", str(folder), cache_dir=cache_dir)
    assert "split answers (answers.jsonl): 5 questions, 3 kept, 2 excluded" in out
    assert "kept by answer kind: list 1, scalar 1, table 1" in out
    assert "  - answers:3 (shop) gold answer unusable: gold cells must be int, float, str" in out
    assert "  - answers:4 (shop) gold answer unusable: a gold answer needs at least one" in out
    assert "split typed (typed.csv): 3 questions, 3 kept, 0 excluded" in out
    assert "kept by hardness: easy 1, hard 1, unrated 1" in out
    for split in ("answers", "typed"):
        settings = Settings(data_dir=str(folder), split=split, cache_dir=str(cache_dir))
        assert oracle_success(settings) == (3, 3)
    sessions = open_manager(
        Settings(data_dir=str(folder), split="answers", cache_dir=str(cache_dir))
    )
    try:
        for value, verdict in (('["ink", "pen"]', "Correct."), ("3", "Incorrect.")):
            episode = sessions.create(question_id="answers:0" if value == "3" else "answers:1")
            assert episode.call("answer", {"value": value}).text.startswith(verdict)
    finally:
        sessions.shutdown()


def test_a_question_with_both_a_gold_sql_and_a_gold_answer_is_refused(tmp_path, cache_dir):
    (tmp_path / "shop.sqlite").write_bytes(b"")
    record = {"db_id": "shop", "question": "How many?", "sql": "SELECT 2", "answer": 2}
    (tmp_path / "both.jsonl").write_text(json.dumps(record) + "\n")
    command = [sys.executable, "-m", "env_core.cli", "data", "check", "--data-dir", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "both.jsonl, record 0: gives both sql and answer: give the one the question is" in (
        done.stderr
    )


def test_data_check_explains_a_folder_it_cannot_read(tmp_path, cache_dir):
    (tmp_path / "notes.txt").write_text("hello")
    command = [sys.executable, "-m", "env_core.cli", "data", "check", "--data-dir", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "is not a data folder this environment reads" in done.stderr
    assert "BIRD (dev.json or train.json and <split>_databases/<db>/<db>.sqlite)" in done.stderr


@pytest.fixture(scope="module")
def spider2_lite_dir(tmp_path_factory) -> Path:
    return write_fixture("spider2-lite", tmp_path_factory.mktemp("data") / "spider2-lite")


def test_a_spider2_lite_folder_keeps_its_sqlite_questions_with_result_golds(
    spider2_lite_dir, cache_dir
):
    out = sqlenv("data", "check", "--data-dir", str(spider2_lite_dir), cache_dir=cache_dir)
    assert "(spider2-lite layout)" in out
    assert "split lite (spider2-lite.jsonl): 4 questions, 3 kept, 1 excluded" in out
    assert "  - lite:3 (school_fund) gold missing: no gold result file" in out
    settings = Settings(data_dir=str(spider2_lite_dir), split="lite", cache_dir=str(cache_dir))
    assert oracle_success(settings) == (3, 3)


@pytest.mark.parametrize(
    ("question_id", "answer", "correct"),
    [
        ("lite:0", [["Kent", 111500.75], ["Essex", 70500.75]], True),
        ("lite:0", [["Essex", 70500.75], ["Kent", 111500.75]], False),  # ignore_order false
        ("lite:1", [["Birch High", 99000.25]], True),
        ("lite:1", [[2, "99000.25"]], True),  # the other acceptable result
        ("lite:1", [["Cedar Academy", 61500.0]], False),
        ("lite:2", [["Kent", 1150], ["Essex", 800]], True),  # more columns than the condition
        ("lite:2", [[800], [1150]], True),
        ("lite:2", [["Kent", 1150], ["Essex", 801]], False),
    ],
)
def test_spider2_lite_answers_are_checked_on_condition_columns_against_any_result(
    spider2_lite_dir, cache_dir, question_id, answer, correct
):
    settings = Settings(data_dir=str(spider2_lite_dir), split="lite", cache_dir=str(cache_dir))
    manager = open_manager(settings)
    try:
        episode = manager.create(question_id=question_id)
        episode.call("answer", {"value": json.dumps(answer)})
        assert episode.correct is correct
    finally:
        manager.shutdown()


def test_a_spider2_lite_document_is_shown_with_its_question(spider2_lite_dir, cache_dir):
    settings = Settings(data_dir=str(spider2_lite_dir), split="lite", cache_dir=str(cache_dir))
    manager = open_manager(settings)
    try:
        text = manager.create(question_id="lite:1").start.text
    finally:
        manager.shutdown()
    assert text.startswith(
        "Question: Which school received the most money under the grant rules?\n"
        "Evidence: # Grant rules\n\nA school's money is the sum of its grants over every year."
    )
    assert "\nDatabase: school_fund\n" in text
