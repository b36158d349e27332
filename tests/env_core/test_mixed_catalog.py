"""Several datasets in one run: Spider dev, Spider-Syn dev and Spider-DK (the real releases)
and the BIRD fixture this project writes, served by one manager."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from env_core.demo import demo_data_dir
from env_core.errors import DataError, UnknownQuestionError
from env_core.factory import check_split, open_manager
from env_core.oracle import play_oracle
from env_core.settings import Settings
from tests.env_core.test_datasets import shared_data, write_fixture


def location(*entries: str) -> str:
    return os.pathsep.join(entries)


@pytest.fixture(scope="module")
def bird_dir(tmp_path_factory) -> Path:
    return write_fixture("bird", tmp_path_factory.mktemp("data") / "bird")


@pytest.fixture(scope="module")
def mixed_settings(spider_dir, bird_dir, cache_dir) -> Settings:
    return Settings(
        data_dir=location(
            f"{spider_dir}@dev_without_wta_1",
            str(shared_data("spider-syn")),
            f"{shared_data('spider-dk')}@Spider-DK",
            str(bird_dir),
        ),
        databases_dir=str(spider_dir / "database"),
        cache_dir=str(cache_dir),
    )


@pytest.fixture(scope="module")
def mixed(mixed_settings):
    manager = open_manager(mixed_settings)
    yield manager
    manager.shutdown()


def test_a_mixed_run_serves_every_dataset_with_ids_that_name_it(mixed):
    questions = mixed.catalog.questions("dev")
    catalogs = mixed.catalog.catalogs
    counts = {name: sum(q.dataset == name for q in questions) for name in catalogs}
    kept = {name: len(c.questions()) for name, c in catalogs.items()}
    assert counts == kept == {"spider": 896, "spider-syn": 900, "spider-dk": 418, "bird": 4}
    assert {q.id.split(":")[0] for q in questions} == {
        "spider/dev_without_wta_1",
        "spider-syn/dev",
        "spider-dk/Spider-DK",
        "bird/dev",
    }
    assert len({q.id for q in questions}) == len(questions)
    assert mixed.served()["questions"] == len(questions)


def test_the_dataset_selector_draws_only_from_that_dataset(mixed):
    for name in mixed.catalog.catalogs:
        chosen = {mixed.choose_question(seed=seed, dataset=name) for seed in range(20)}
        assert {q.dataset for q in chosen} == {name}
    first = mixed.choose_question(seed=7, dataset="spider-dk")
    assert mixed.choose_question(seed=7, dataset="spider-dk") == first
    assert mixed.choose_question(seed=7, dataset="bird", db_id="school_fund").db_id == "school_fund"


def test_a_prefixed_id_starts_its_question_and_the_oracle_solves_one_of_each(mixed):
    for name in mixed.catalog.catalogs:
        question = mixed.choose_question(seed=3, dataset=name)
        episode = mixed.create(question_id=question.id)
        assert episode.question is question
        play_oracle(episode)
        assert episode.correct, question.id
        mixed.close(episode.episode_id)


def test_spider_syn_asks_about_spiders_own_databases_under_their_own_ids(mixed, spider_dir):
    syn = mixed.choose_question(seed=1, dataset="spider-syn")
    assert "/" not in syn.db_id
    path = spider_dir / "database" / syn.db_id / f"{syn.db_id}.sqlite"
    assert mixed.catalog.database_path(syn.db_id) == path


def test_two_files_of_one_database_name_are_told_apart_by_dataset(tmp_path, cache_dir):
    demo = demo_data_dir(cache_dir)
    shutil.copytree(demo, tmp_path / "copy")
    settings = Settings(data_dir=location(f"a={demo}", f"b={tmp_path / 'copy'}"))
    manager = open_manager(settings, cache_dir=str(cache_dir))
    try:
        question = manager.choose_question(seed=0, dataset="b")
        assert question.db_id.startswith("b/")
        own = question.db_id.removeprefix("b/")
        path = manager.catalog.database_path(question.db_id)
        assert path == tmp_path / "copy" / "database" / own / f"{own}.sqlite"
        assert manager.catalog.database_path(f"a/{own}").parent.parent.parent == demo
        play_oracle(episode := manager.create(question_id=question.id))
        assert episode.correct
    finally:
        manager.shutdown()


def test_an_unknown_dataset_or_id_is_a_clear_error(mixed):
    with pytest.raises(UnknownQuestionError, match="no dataset 'birds'; loaded datasets: spider,"):
        mixed.choose_question(dataset="birds")
    with pytest.raises(UnknownQuestionError, match="ids look like 'spider/dev_without_wta_1:12'"):
        mixed.choose_question(question_id="dev:3")
    with pytest.raises(UnknownQuestionError, match="no questions for database 'car_1' of dataset"):
        mixed.choose_question(dataset="bird", db_id="car_1")


def test_one_folder_serves_as_it_always_did(spider_dir, cache_dir):
    manager = open_manager(
        Settings(data_dir=str(spider_dir), split="dev_without_wta_1", cache_dir=str(cache_dir))
    )
    try:
        assert manager.choose_question(seed=0).id.startswith("dev_without_wta_1:")
        assert manager.choose_question(seed=0, dataset="spider").dataset == "spider"
        with pytest.raises(UnknownQuestionError, match=r"loaded datasets: spider$"):
            manager.choose_question(dataset="bird")
    finally:
        manager.shutdown()


@pytest.mark.parametrize(
    ("entries", "error"),
    [
        (["{spider}", "{spider}"], "two datasets are named 'spider'; name them apart"),
        (["{spider}", ""], "an empty dataset in the data location"),
        (["{spider}", "x={spider}/nowhere"], "dataset 'x': .*nowhere is not a folder"),
        (
            ["{spider}", "{syn}@test"],
            "dataset 'spider-syn': no question file for split 'test' in .*spider-syn;"
            " available: dev, train_spider",
        ),
    ],
)
def test_a_bad_data_location_is_a_short_error_and_loads_nothing(
    entries, error, spider_dir, tmp_path
):
    syn = shared_data("spider-syn")
    data_dir = location(*(e.format(spider=spider_dir, syn=syn) for e in entries))
    settings = Settings(
        data_dir=data_dir,
        databases_dir=str(spider_dir / "database"),
        cache_dir=str(tmp_path / "cache"),
        split="dev",
    )
    with pytest.raises(DataError, match=error):
        open_manager(settings)
    with pytest.raises(DataError, match=error):
        check_split(settings)
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("command", ["check", "prepare"])
def test_data_commands_take_one_dataset_at_a_time(command, spider_dir, bird_dir, tmp_path):
    data_dir = location(str(spider_dir), str(bird_dir))
    done = subprocess.run(
        [sys.executable, "-m", "env_core.cli", "data", command, "--data-dir", data_dir],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SQLENV_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"sqlenv data {command}: this command reads one dataset at a time: give it each folder "
        "on its own\n"
    )
    assert not (tmp_path / "cache").exists()


def test_the_settings_variable_names_several_datasets_too(spider_dir, bird_dir, cache_dir):
    environ = {
        "SQLENV_DATA_DIR": location(f"dk={shared_data('spider-dk')}", str(bird_dir)),
        "SQLENV_DATABASES_DIR": str(spider_dir / "database"),
        "SQLENV_SPLIT": "dev",
        "SQLENV_CACHE_DIR": str(cache_dir),
    }
    with pytest.raises(DataError, match="dataset 'dk': no question file for split 'dev'"):
        open_manager(Settings.from_environment(environ))
    environ["SQLENV_DATA_DIR"] = location(f"dk={shared_data('spider-dk')}@Spider-DK", str(bird_dir))
    manager = open_manager(Settings.from_environment(environ))
    try:
        assert set(manager.catalog.catalogs) == {"dk", "bird"}
        assert manager.choose_question(seed=2, dataset="dk").id.startswith("dk/Spider-DK:")
    finally:
        manager.shutdown()


def test_a_dataset_is_named_after_its_layout_unless_named(tmp_path, spider_dir, cache_dir):
    release = write_fixture("bird", tmp_path / "dev_20240627")  # BIRD's release folder name
    demo = demo_data_dir(cache_dir)
    settings = Settings(data_dir=location(str(demo), str(release)), cache_dir=str(cache_dir))
    manager = open_manager(settings)
    try:
        assert set(manager.catalog.catalogs) == {"spider", "bird"}
        assert manager.choose_question(seed=0, dataset="bird").id.startswith("bird/dev:")
    finally:
        manager.shutdown()
    with pytest.raises(DataError, match="two datasets are named 'spider'; name them apart"):
        open_manager(settings, data_dir=location(str(demo), str(spider_dir)))
    named = open_manager(settings, data_dir=location(f"demo={demo}", f"{spider_dir}@dev"))
    named.shutdown()
    assert set(named.catalog.catalogs) == {"demo", "spider"}
