from collections import Counter

from env_core.demo import demo_data_dir
from env_core.manager import EpisodeManager
from env_core.oracle import play_oracle
from env_core.settings import Settings


def test_demo_catalog_covers_every_kind_of_question(demo_catalog):
    split = demo_catalog.splits["dev"]
    questions = split.questions
    assert split.excluded == ()
    assert len(questions) >= 40
    assert len({q.db_id for q in questions}) >= 3
    hardness = Counter(q.hardness for q in questions)
    assert all(hardness[level] >= 8 for level in ("easy", "medium", "hard", "extra"))
    cells = [(q, cell) for q in questions for row in q.gold.rows for cell in row]
    assert sum(q.gold.ordered for q in questions) >= 6
    assert sum(q.kind == "table" for q in questions) >= 8
    assert len({q.id for q, cell in cells if type(cell) is float and cell != int(cell)}) >= 6
    assert len({q.id for q, cell in cells if cell is None}) >= 4
    assert any(len(set(q.gold.rows)) < len(q.gold.rows) for q in questions)


def test_the_oracle_solves_every_demo_question(demo_catalog):
    manager = EpisodeManager(demo_catalog, Settings(split="dev"))
    for question in demo_catalog.questions("dev"):
        episode = manager.create(question_id=question.id)
        play_oracle(episode)
        assert episode.correct, question.id
        manager.close(episode.episode_id)


def test_demo_build_is_cached_and_stable(cache_dir, tmp_path):
    assert demo_data_dir(cache_dir) == demo_data_dir(cache_dir)
    fresh = demo_data_dir(tmp_path)
    assert fresh.name == demo_data_dir(cache_dir).name
    assert sorted(p.name for p in (fresh / "database").iterdir()) == [
        "city_library",
        "cycle_hire",
        "farm_shop",
    ]
