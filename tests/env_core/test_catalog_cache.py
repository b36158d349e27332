"""Cache faults degrade, never crash or mislead.

An unwritable cache directory (read-only, full, or any OSError) leaves the split served from
memory with a warning and no partial file; a damaged or edited cache file is prepared again
with a warning naming it. In every case the catalog served equals a fresh build.

The read-only and full-disk directories are real mounts (a read-only bind mount, a 64 KiB
tmpfs), so these tests need root, as CI runs them; elsewhere they fail and say why.
"""

import contextlib
import errno
import hashlib
import json
import logging
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from env_core.catalog import DATABASE_HASHES, Catalog, Split
from env_core.demo import CHECKSUMS, demo_data_dir

LABEL_CHARS = 450


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """A Spider-format directory whose prepared split (about 100 KB) overflows a 64 KiB disk."""
    root = tmp_path_factory.mktemp("data")
    db = root / "database" / "shelf" / "shelf.sqlite"
    db.parent.mkdir(parents=True)
    with contextlib.closing(sqlite3.connect(db)) as connection:
        connection.execute("CREATE TABLE book(id INTEGER PRIMARY KEY, label TEXT, price REAL)")
        connection.executemany(
            "INSERT INTO book(label, price) VALUES (?, ?)",
            [(f"{index:03d}" * (LABEL_CHARS // 3), index * 1.25) for index in range(100)],
        )
        connection.commit()
    questions = [
        ("How many books?", "SELECT count(*) FROM book"),
        ("Labels?", "SELECT label FROM book"),
        ("Labels by price?", "SELECT label, price FROM book ORDER BY price DESC"),
        ("Broken?", "SELECT nothing FROM book"),
    ]
    records = [{"db_id": "shelf", "question": q, "query": sql} for q, sql in questions]
    (root / "dev.json").write_text(json.dumps(records))
    return root


@pytest.fixture(scope="module")
def fresh(data_dir, tmp_path_factory) -> Split:
    return Catalog.load(data_dir, cache_dir=tmp_path_factory.mktemp("fresh")).splits["dev"]


def load(data_dir: Path, cache_dir: Path) -> Split:
    return Catalog.load(data_dir, cache_dir=cache_dir).splits["dev"]


def assert_same_catalog(split: Split, fresh: Split) -> None:
    assert split.questions == fresh.questions and split.excluded == fresh.excluded
    assert len(split.questions) == 3 and len(split.excluded) == 1


def warnings_naming(caplog, path: Path) -> list[str]:
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    return [message for message in messages if str(path) in message]


@contextlib.contextmanager
def mounted(point: Path, *arguments: str):
    if os.geteuid() != 0:
        pytest.fail("this test mounts a file system and needs root (CI runs it as root)")
    point.mkdir(exist_ok=True)
    subprocess.run(["mount", *arguments, str(point)], check=True, capture_output=True)
    try:
        yield point
    finally:
        # lazily, so that a file left open by a failing test cannot keep the mount
        subprocess.run(["umount", "--lazy", str(point)], check=True, capture_output=True)


@contextlib.contextmanager
def read_only_view(source: Path, point: Path):
    """`point` shows `source` through a read-only bind mount."""
    with mounted(point, "--bind", str(source)):
        subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(point)], check=True, capture_output=True
        )
        yield point


def test_read_only_cache_dir_serves_from_memory_and_writes_nothing(
    data_dir, fresh, tmp_path, caplog
):
    empty = tmp_path / "empty"
    empty.mkdir()
    with read_only_view(empty, tmp_path / "cache") as cache:
        with pytest.raises(OSError) as refused:
            (cache / "probe").write_text("x")
        assert refused.value.errno == errno.EROFS
        split = load(data_dir, cache)
        assert not split.from_cache
        assert_same_catalog(split, fresh)
        assert list(cache.iterdir()) == []
    assert warnings_naming(caplog, tmp_path / "cache")


def test_read_only_cache_dir_still_serves_a_valid_cache(data_dir, fresh, tmp_path, caplog):
    writable = tmp_path / "writable"
    load(data_dir, writable)
    with read_only_view(writable, tmp_path / "cache") as cache:
        split = load(data_dir, cache)
    assert split.from_cache
    assert_same_catalog(split, fresh)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_full_disk_serves_from_memory_and_leaves_no_partial_file(data_dir, fresh, tmp_path, caplog):
    with mounted(tmp_path / "cache", "-t", "tmpfs", "-o", "size=64k", "tmpfs") as cache:
        split = load(data_dir, cache)
        assert not split.from_cache
        assert_same_catalog(split, fresh)
        assert list(cache.iterdir()) == []
        [warning] = warnings_naming(caplog, cache)
        assert "No space left on device" in warning
        assert "serving the catalog from memory" in warning


@pytest.mark.parametrize("failing", ["mkdir", "write_bytes", "replace"])
def test_any_os_error_while_writing_serves_from_memory(
    data_dir, fresh, tmp_path, caplog, monkeypatch, failing
):
    """Whatever step of the write fails (here by an injected OSError), nothing is left."""
    cache = tmp_path / "cache"
    cache.mkdir()
    real = getattr(Path, failing)

    def failing_in_cache(path: Path, *args, **kwargs):
        if cache in (path, path.parent):
            raise OSError(errno.EIO, "injected I/O error")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(Path, failing, failing_in_cache)
    split = load(data_dir, cache)
    monkeypatch.undo()
    assert not split.from_cache
    assert_same_catalog(split, fresh)
    assert list(cache.iterdir()) == []
    assert any("injected I/O error" in w for w in warnings_naming(caplog, cache))


def only_cache_file(cache: Path) -> Path:
    [cache_file] = cache.glob("dev-*.json")
    return cache_file


def rewrite_with_hash(cache_file: Path, payload: object) -> None:
    """Replace the content and fix its hash, as a careful editor would."""
    content = json.dumps(payload).encode()
    header = b"sqlenv catalog sha256:" + hashlib.sha256(content).hexdigest().encode()
    cache_file.write_bytes(header + b"\n" + content)


def truncated(cache_file: Path) -> None:
    cache_file.write_bytes(cache_file.read_bytes()[: cache_file.stat().st_size // 2])


def emptied(cache_file: Path) -> None:
    cache_file.write_bytes(b"")


def empty_object(cache_file: Path) -> None:
    cache_file.write_text("{}")


def gold_edited(cache_file: Path) -> None:
    content = cache_file.read_bytes()
    assert content.count(b"[[100]]") == 1  # the count question's gold
    cache_file.write_bytes(content.replace(b"[[100]]", b"[[101]]"))


def wrong_structure_with_its_hash(cache_file: Path) -> None:
    rewrite_with_hash(cache_file, {"questions": {"dev:0": "?"}, "excluded": []})


def wrong_types_with_its_hash(cache_file: Path) -> None:
    payload = json.loads(cache_file.read_bytes().partition(b"\n")[2])
    payload["questions"][0][0] = 7
    rewrite_with_hash(cache_file, payload)


def gold_cells_of_wrong_type_with_their_hash(cache_file: Path) -> None:
    payload = json.loads(cache_file.read_bytes().partition(b"\n")[2])
    payload["questions"][0][6] = [[{"n": 100}]]
    rewrite_with_hash(cache_file, payload)


def unreadable(cache_file: Path) -> None:
    cache_file.unlink()
    cache_file.mkdir()  # reading it fails with an OSError, even as root


@pytest.mark.parametrize(
    "damage",
    [
        truncated,
        emptied,
        empty_object,
        gold_edited,
        wrong_structure_with_its_hash,
        wrong_types_with_its_hash,
        gold_cells_of_wrong_type_with_their_hash,
    ],
)
def test_a_damaged_or_edited_cache_is_prepared_again(data_dir, fresh, tmp_path, caplog, damage):
    cache_file = load_after(damage, data_dir, tmp_path / "cache", fresh)
    assert warnings_naming(caplog, cache_file)
    again = load(data_dir, cache_file.parent)  # the rebuilt cache was written back, trusted
    assert again.from_cache
    assert_same_catalog(again, fresh)
    hashes = cache_file.parent / DATABASE_HASHES  # the databases' hashes, for the next start
    assert sorted(cache_file.parent.iterdir()) == sorted([cache_file, hashes])


def test_an_unreadable_cache_file_is_prepared_again(data_dir, fresh, tmp_path, caplog):
    cache_file = load_after(unreadable, data_dir, tmp_path / "cache", fresh)
    assert any("cannot read" in w for w in warnings_naming(caplog, cache_file))
    assert any("cannot write" in w for w in warnings_naming(caplog, cache_file.parent))


def load_after(damage, data_dir: Path, cache: Path, fresh: Split) -> Path:
    """Prepare the split into the cache, damage the cache file, and load again: the split is
    prepared again and equals a fresh build. Returns the cache file."""
    load(data_dir, cache)
    cache_file = only_cache_file(cache)
    damage(cache_file)
    split = load(data_dir, cache)
    assert not split.from_cache
    assert_same_catalog(
        split, Catalog.load(data_dir, cache_dir=cache.parent / "fresh").splits["dev"]
    )
    return cache_file


# --- The demo build ----------------------------------------------------------------------


def demo_listing(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


def test_unwritable_cache_builds_the_demo_in_a_private_directory(tmp_path, caplog, demo_catalog):
    empty = tmp_path / "empty"
    empty.mkdir()
    with read_only_view(empty, tmp_path / "cache") as cache:
        built = demo_data_dir(cache)
        assert cache not in built.parents and list(cache.iterdir()) == []
        catalog = Catalog.load(built, ["dev"], cache_dir=cache)
    assert catalog.splits["dev"].questions == demo_catalog.splits["dev"].questions
    [warning] = [w for w in warnings_naming(caplog, cache) if "demo" in w]
    assert str(built) in warning
    assert demo_data_dir(tmp_path / "writable") != built


def test_a_full_disk_builds_the_demo_in_a_private_directory_and_leaves_nothing(tmp_path, caplog):
    with mounted(tmp_path / "cache", "-t", "tmpfs", "-o", "size=64k", "tmpfs") as cache:
        built = demo_data_dir(cache)
        assert cache not in built.parents and list(cache.iterdir()) == []
    assert (built / CHECKSUMS).is_file()
    assert any(str(built) in w for w in warnings_naming(caplog, cache))


def damage_a_database(build: Path) -> None:
    [database] = list(build.glob("database/farm_shop/*.sqlite"))
    database.write_bytes(database.read_bytes()[:4096])


def drop_the_checksums(build: Path) -> None:
    (build / CHECKSUMS).unlink()


def edit_a_question(build: Path) -> None:
    questions = build / "dev.json"
    questions.write_text(questions.read_text().replace('"query"', '"query" ', 1))


def remove_a_database(build: Path) -> None:
    [database] = list(build.glob("database/cycle_hire/*.sqlite"))
    database.unlink()


@pytest.mark.parametrize(
    "damage", [damage_a_database, drop_the_checksums, edit_a_question, remove_a_database]
)
def test_a_damaged_or_partial_demo_build_is_built_again(tmp_path, caplog, damage):
    first = demo_data_dir(tmp_path)
    listing = demo_listing(first)
    checksums = (first / CHECKSUMS).read_text()
    damage(first)
    again = demo_data_dir(tmp_path)
    assert again == first
    assert demo_listing(again) == listing
    assert (again / CHECKSUMS).read_text() == checksums
    assert warnings_naming(caplog, first)
    assert [p.name for p in tmp_path.iterdir()] == [first.name]
