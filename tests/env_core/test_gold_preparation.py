"""Preparing a split at BIRD's scale: every gold runs once in the SQL workers under the agent's
limits (a gold past the time or memory limit is excluded, saying which), the split's progress is
shown on stderr, the limits are part of the cache key, and the database is read in place, and
read again only when it has been written since."""

import hashlib
import os
import pty
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from env_core.catalog import Catalog

LARGE_DATABASE = Path("dev_databases") / "gauge_log" / "gauge_log.sqlite"


def sqlenv(*args: str, cache_dir: Path, stderr=subprocess.PIPE) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "env_core.cli", *args, "--cache-dir", str(cache_dir)]
    return subprocess.run(
        command, stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=300, check=True
    )


def file_hash(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def test_a_gold_past_the_agents_time_or_memory_limit_is_excluded_saying_so(
    large_bird_dir, tmp_path
):
    database = large_bird_dir / LARGE_DATABASE
    before = (file_hash(database), database.stat().st_mtime_ns)
    check = sqlenv("data", "check", "--data-dir", str(large_bird_dir), cache_dir=tmp_path)
    assert "split dev (dev.json): 7 questions, 5 kept, 2 excluded" in check.stdout
    assert (
        "- dev:5 (gauge_log) gold over memory: gold needed more than 64 MiB of memory "
        "(--sql-memory)" in check.stdout
    )
    assert "- dev:6 (gauge_log) gold timed out: gold ran longer than 2 s (--query-timeout)" in (
        check.stdout
    )
    assert (file_hash(database), database.stat().st_mtime_ns) == before
    assert sorted(p.name for p in database.parent.iterdir()) == ["gauge_log.sqlite"]


def test_the_agents_limits_are_part_of_the_cache_key(large_bird_dir, tmp_path):
    prepare = ("data", "prepare", "--data-dir", str(large_bird_dir))
    first = sqlenv(*prepare, cache_dir=tmp_path).stdout
    again = sqlenv(*prepare, cache_dir=tmp_path).stdout
    shorter = sqlenv(*prepare, "--query-timeout", "0.01", cache_dir=tmp_path).stdout
    assert "cold start (gold queries run)" in first
    assert "start (from cache)" in again
    assert "cold start (gold queries run)" in shorter
    assert "excluded, gold timed out: 1\n" in first
    timed_out = re.search(r"excluded, gold timed out: (\d+)", shorter)
    assert timed_out and int(timed_out[1]) > 1


def test_preparation_shows_its_progress_as_lines_or_as_a_bar_on_a_terminal(
    large_bird_dir, tmp_path
):
    prepare = ("data", "prepare", "--data-dir", str(large_bird_dir))
    lines = sqlenv(*prepare, cache_dir=tmp_path / "plain").stderr.splitlines()
    assert lines and all(
        line.startswith("split dev: ") and line.endswith("/7 questions prepared") for line in lines
    )
    assert lines[-1] == "split dev: 7/7 questions prepared"
    leader, follower = pty.openpty()
    try:
        sqlenv(*prepare, cache_dir=tmp_path / "terminal", stderr=follower)
        drawn = os.read(leader, 65536).decode()
    finally:
        os.close(leader)
        os.close(follower)
    assert re.search(r"\rsplit dev: \[[#-]{30}\] [0-6]/7 questions prepared", drawn)
    assert drawn.endswith("\r\x1b[K")


def bytes_read() -> int:
    """What this process has read through system calls so far (page cache included)."""
    io = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(io["rchar"])


def test_a_warm_start_reads_no_database_and_a_database_written_since_is_read_again(
    large_bird_dir, tmp_path
):
    database = large_bird_dir / LARGE_DATABASE
    Catalog.load(large_bird_dir, cache_dir=tmp_path)
    before = bytes_read()
    warm = Catalog.load(large_bird_dir, cache_dir=tmp_path).splits["dev"]
    assert warm.from_cache
    assert bytes_read() - before < database.stat().st_size // 100
    small = tmp_path / "small"  # a copy of the large one would cost another 303 MB
    script = Path(__file__).resolve().parents[2] / "scripts" / "dataset_fixtures.py"
    subprocess.run([sys.executable, str(script), "bird", str(small)], check=True, timeout=60)
    Catalog.load(small, cache_dir=tmp_path)
    written = small / "dev_databases" / "school_fund" / "school_fund.sqlite"
    kept = written.stat()
    with sqlite3.connect(written) as connection:  # one value changed, size and mtime kept
        connection.execute("UPDATE grants SET amount = amount + 1 WHERE id = 1")
    connection.close()
    os.utime(written, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    assert written.stat().st_size == kept.st_size
    assert not Catalog.load(small, cache_dir=tmp_path).splits["dev"].from_cache
