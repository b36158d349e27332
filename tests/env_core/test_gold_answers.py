"""Every kept question's gold, answered as JSON, scores correct; near-misses score wrong."""

import json
import random

import pytest

from env_core.answers import AnswerChecker, gold_as_json

CHECKER = AnswerChecker()
TRAIN_SAMPLE = 1500


def perturbations(gold) -> dict[str, list[list]]:
    """Wrong answers one small mistake away from the gold, by the mistake's name."""
    rows = [list(row) for row in gold.rows]
    wrong = {"row dropped": rows[1:], "row duplicated": [*rows, rows[-1]]}
    if gold.ordered:
        keys = [json.dumps(row).casefold() for row in rows]
        swap = next((i for i in range(len(rows) - 1) if keys[i] != keys[i + 1]), None)
        if swap is not None:
            swapped = list(rows)
            swapped[swap], swapped[swap + 1] = swapped[swap + 1], swapped[swap]
            wrong["order swapped"] = swapped
    for r, row in enumerate(rows):
        c = next((c for c, v in enumerate(row) if type(v) in (int, float)), None)
        if c is not None:
            value = row[c]
            off = value + 1 if type(value) is int else value + max(abs(value) * 0.01, 0.01)
            changed = [list(x) for x in rows]
            changed[r][c] = off
            wrong["number off"] = changed
            break
    return wrong


def check_split(questions) -> tuple[int, list[str]]:
    failures, wrong_checked = [], 0
    for question in questions:
        if not CHECKER.check(question.gold, gold_as_json(question.gold)).correct:
            failures.append(f"{question.id}: gold answer scored wrong")
        for mistake, answer in perturbations(question.gold).items():
            wrong_checked += 1
            if CHECKER.check(question.gold, json.dumps(answer)).correct:
                failures.append(f"{question.id}: {mistake} scored correct")
    return wrong_checked, failures


def test_whole_dev_split(spider_catalog):
    questions = spider_catalog.questions("dev_without_wta_1")
    wrong_checked, failures = check_split(questions)
    assert failures == []
    assert len(questions) == 896 and wrong_checked > 2 * len(questions)


def test_sampled_train_split(spider_catalog):
    questions = random.Random(0).sample(spider_catalog.questions("train_spider_min"), TRAIN_SAMPLE)
    wrong_checked, failures = check_split(questions)
    assert failures == []
    assert wrong_checked > 2 * TRAIN_SAMPLE


@pytest.mark.parametrize("split", ["dev_without_wta_1"])
def test_gold_answers_through_the_episode(spider_catalog, split):
    from env_core.manager import EpisodeManager
    from env_core.settings import Settings

    manager = EpisodeManager(spider_catalog, Settings(split=split))
    for question in spider_catalog.questions(split)[:100]:
        episode = manager.create(question_id=question.id)
        result = episode.call("answer", {"value": gold_as_json(question.gold)})
        assert result.data == {"correct": True}, question.id
        manager.close(episode.episode_id)
