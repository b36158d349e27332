"""The embedded demo dataset: SQL scripts and questions shipped in `env_core/demo_data/`.

They are built into a Spider-format directory in the cache on first use (keyed by the scripts'
hash), so the demo goes through exactly the same catalog code as Spider does. A build lists the
checksums of its files, and is used only while they match: a damaged or partial build is built
again. When the cache cannot be written, the demo is built in a private temporary directory.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import shutil
import sqlite3
import tempfile
import threading
from pathlib import Path

from env_core.catalog import default_cache_dir
from env_core.errors import DataError

DEMO_SOURCES = Path(__file__).parent / "demo_data"
CHECKSUMS = "SHA256SUMS"

log = logging.getLogger(__name__)


def demo_data_dir(cache_dir: Path | None = None) -> Path:
    """The demo as a Spider-format directory, built if the cache does not hold it yet."""
    scripts = sorted(DEMO_SOURCES.glob("*.sql"))
    questions = DEMO_SOURCES / "questions.json"
    digest = hashlib.sha256(CHECKSUMS.encode())  # builds without checksums are not reused
    for source in [*scripts, questions]:
        digest.update(source.name.encode() + source.read_bytes())
    cache = cache_dir or default_cache_dir()
    target = cache / f"demo-{digest.hexdigest()[:16]}"
    if _is_complete(target, scripts):
        return target
    building = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.building")
    try:
        if target.exists():
            log.warning("the demo build %s is damaged or incomplete; building it again", target)
            shutil.rmtree(target)
        shutil.rmtree(building, ignore_errors=True)
        _build(building, scripts, questions)
        building.rename(target)
    except (OSError, sqlite3.Error) as error:
        shutil.rmtree(building, ignore_errors=True)
        if _is_complete(target, scripts):  # another process finished the same build first
            return target
        return _private_build(
            scripts, questions, f"cannot build the demo dataset in {cache}: {error}"
        )
    return target


def resolve_data_dir(data_dir: str | Path | None, cache_dir: Path | None = None) -> Path:
    """The data directory to use: the argument, else $SQLENV_DATA_DIR, else the demo."""
    chosen = data_dir or os.environ.get("SQLENV_DATA_DIR")
    return Path(chosen) if chosen else demo_data_dir(cache_dir)


def _build(directory: Path, scripts: list[Path], questions: Path) -> None:
    for script in scripts:
        path = directory / "database" / script.stem / f"{script.stem}.sqlite"
        path.parent.mkdir(parents=True)
        with contextlib.closing(sqlite3.connect(path)) as connection:
            connection.executescript(script.read_text(encoding="utf-8"))
    shutil.copyfile(questions, directory / "dev.json")
    (directory / CHECKSUMS).write_text(_checksums(directory, scripts), encoding="utf-8")


def _is_complete(build: Path, scripts: list[Path]) -> bool:
    try:
        return (build / CHECKSUMS).read_text(encoding="utf-8") == _checksums(build, scripts)
    except (OSError, ValueError):
        return False


def _checksums(build: Path, scripts: list[Path]) -> str:
    """`sha256sum` lines for every file of a build."""
    names = [f"database/{script.stem}/{script.stem}.sqlite" for script in scripts]
    return "".join(
        f"{hashlib.sha256((build / name).read_bytes()).hexdigest()}  {name}\n"
        for name in [*names, "dev.json"]
    )


def _private_build(scripts: list[Path], questions: Path, reason: str) -> Path:
    try:
        private = Path(tempfile.mkdtemp(prefix="sqlenv-demo-"))
        atexit.register(shutil.rmtree, private, ignore_errors=True)
        _build(private, scripts, questions)
    except (OSError, sqlite3.Error) as error:
        raise DataError(f"{reason}; nor in a temporary directory: {error}") from error
    log.warning("%s; built it in %s instead, which is removed at exit", reason, private)
    return private
