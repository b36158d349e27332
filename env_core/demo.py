"""The embedded demo dataset: SQL scripts and questions shipped in `env_core/demo_data/`.

They are built into a Spider-format directory in the cache on first use (keyed by the scripts'
hash), so the demo goes through exactly the same catalog code as Spider does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from pathlib import Path

from env_core.catalog import database_path, default_cache_dir

DEMO_SOURCES = Path(__file__).parent / "demo_data"


def demo_data_dir(cache_dir: Path | None = None) -> Path:
    """The demo as a Spider-format directory, built if it is not in the cache yet."""
    scripts = sorted(DEMO_SOURCES.glob("*.sql"))
    questions = DEMO_SOURCES / "questions.json"
    digest = hashlib.sha256()
    for source in [*scripts, questions]:
        digest.update(source.name.encode() + source.read_bytes())
    target = (cache_dir or default_cache_dir()) / f"demo-{digest.hexdigest()[:16]}"
    if target.is_dir():
        return target
    building = target.with_name(f"{target.name}.{os.getpid()}.building")
    shutil.rmtree(building, ignore_errors=True)
    for script in scripts:
        path = database_path(building, script.stem)
        path.parent.mkdir(parents=True)
        with sqlite3.connect(path) as connection:
            connection.executescript(script.read_text(encoding="utf-8"))
        connection.close()
    shutil.copyfile(questions, building / "dev.json")
    try:
        building.rename(target)
    except OSError:  # another process finished the same build first
        shutil.rmtree(building, ignore_errors=True)
    return target


def resolve_data_dir(data_dir: str | Path | None, cache_dir: Path | None = None) -> Path:
    """The data directory to use: the argument, else $SQLENV_DATA_DIR, else the demo."""
    chosen = data_dir or os.environ.get("SQLENV_DATA_DIR")
    return Path(chosen) if chosen else demo_data_dir(cache_dir)
