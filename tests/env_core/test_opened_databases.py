"""A episode manager's SQL workers open the served split's databases when they start, so that a
first query on each does not pay for reading its schema; what they open counts as part of a
worker at rest, never as memory a job left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_sandbox_reply_threads import ready
from test_sandbox_sharing import LIMITS, query

from env_core.errors import QueryFailedError
from env_core.manager import EpisodeManager
from env_core.sandbox import OPEN_DATABASES, Sandbox
from env_core.settings import Settings

DEV = "dev_without_wta_1"


def open_files(pid: int) -> set[str]:
    """The regular files a process holds open."""
    fds = Path(f"/proc/{pid}/fd")
    return {os.path.realpath(fd) for fd in fds.iterdir() if os.path.isfile(fd)}


def test_the_workers_of_a_manager_hold_its_splits_databases_open(spider_catalog):
    manager = EpisodeManager(spider_catalog, Settings(split=DEV, sql_workers=2))
    try:
        databases = {q.db_id for q in spider_catalog.splits[DEV].questions}
        paths = {str(spider_catalog.database_path(db_id).resolve()) for db_id in databases}
        for pid in ready(manager.sandbox):
            assert paths <= open_files(pid)
        episode = manager.create(db_id="concert_singer")
        result = manager.step(episode.episode_id, "query", {"sql": "SELECT count(*) FROM singer"})
        assert result.data["rows"] == [[6]]
    finally:
        manager.shutdown()


def test_a_worker_opens_at_most_its_share_of_databases_and_is_not_retired_for_them(spider_dir):
    files = sorted((spider_dir / "database").glob("*/*.sqlite"))
    assert len(files) > OPEN_DATABASES
    pool = Sandbox(workers=1, databases=files, limits=LIMITS)
    try:
        [pid] = ready(pool)
        opened = [path for path in open_files(pid) if path.endswith(".sqlite")]
        assert sorted(opened) == sorted(str(path.resolve()) for path in files[:OPEN_DATABASES])
        assert pool.run(query(files[0], "SELECT 1"))[1] == ((1,),)
        assert [worker.process.pid for worker in pool._idle] == [pid]  # kept, not retired
    finally:
        pool.close()


def test_a_database_gone_before_a_worker_starts_fails_only_its_own_queries(tmp_path, spider_dir):
    concert = spider_dir / "database" / "concert_singer" / "concert_singer.sqlite"
    gone = tmp_path / "gone.sqlite"
    pool = Sandbox(workers=1, databases=[gone, concert], limits=LIMITS)
    try:
        ready(pool)
        assert pool.run(query(concert, "SELECT count(*) FROM singer"))[1] == ((6,),)
        with pytest.raises(QueryFailedError, match="cannot be read"):
            pool.run(query(gone, "SELECT 1"))
        assert pool.killed == 0
    finally:
        pool.close()
