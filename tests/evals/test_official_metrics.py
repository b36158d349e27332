"""Each dataset's official metric beside the environment's verdict, on the questions of the
BIRD and Spider 2.0-lite fixtures this project writes: where the two differ in kind, answers
that one accepts and the other refuses."""

import subprocess
import sys
from pathlib import Path

import pytest

from env_core.answers import AnswerChecker
from env_core.catalog import Catalog
from evals.official import official_verdict

ROOT = Path(__file__).resolve().parents[2]


def fixture_catalog(layout: str, split: str, folder: Path, cache_dir: Path) -> Catalog:
    script = ROOT / "scripts" / "dataset_fixtures.py"
    subprocess.run([sys.executable, str(script), layout, str(folder)], check=True, timeout=60)
    return Catalog.load(folder, [split], cache_dir=cache_dir)


@pytest.fixture(scope="module")
def bird(tmp_path_factory, cache_dir) -> Catalog:
    return fixture_catalog("bird", "dev", tmp_path_factory.mktemp("data") / "bird", cache_dir)


@pytest.fixture(scope="module")
def lite(tmp_path_factory, cache_dir) -> Catalog:
    folder = tmp_path_factory.mktemp("data") / "lite"
    return fixture_catalog("spider2-lite", "lite", folder, cache_dir)


def verdicts(catalog: Catalog, question_id: str, answer: object) -> tuple[bool, bool | None]:
    question = catalog.question(question_id)
    correct = any(AnswerChecker().check(gold, answer).correct for gold in question.golds)
    return correct, official_verdict(question, answer)


@pytest.mark.parametrize(
    ("question_id", "answer", "expected"),
    [
        ("dev:1", "81500.25", (True, True)),
        ("dev:1", "[[81500.25], [81500.25]]", (False, True)),  # sets: the duplicate is not seen
        ("dev:2", '["Cedar Academy", "Birch High"]', (False, True)),  # sets: order never counts
        ("dev:2", '["birch high", "cedar academy"]', (True, False)),  # values must be equal
        ("dev:0", "2.0", (True, True)),
        ("dev:0", "3", (False, False)),
        ("dev:0", None, (False, False)),
    ],
)
def test_bird_execution_accuracy_compares_result_rows_as_sets(bird, question_id, answer, expected):
    correct, official = verdicts(bird, question_id, answer)
    assert (correct if answer is not None else False, official) == expected


@pytest.mark.parametrize(
    ("question_id", "answer", "expected"),
    [
        ("lite:2", '[["Kent", 1150], ["Essex", 800]]', (True, True)),
        ("lite:2", "[[800], [1150.004]]", (False, True)),  # numbers within 0.01
        ("lite:2", '[["Kent", 1150], ["Essex", 801]]', (False, False)),
        ("lite:1", '[["Birch High", 99000.25]]', (True, True)),
        ("lite:1", "[[2, 99000.25]]", (True, True)),  # the other acceptable result
        ("lite:0", '[["Essex", 70500.75], ["Kent", 111500.75]]', (False, False)),  # ordered
    ],
)
def test_spider2_lite_finds_each_condition_column_among_the_answers(
    lite, question_id, answer, expected
):
    assert verdicts(lite, question_id, answer) == expected


def test_spider_has_no_official_metric_of_another_kind(spider_catalog):
    question = spider_catalog.questions("dev_without_wta_1")[0]
    assert official_verdict(question, "42") is None
