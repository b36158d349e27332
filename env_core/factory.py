"""One way for every door to build its episode manager: from `Settings`."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from env_core.catalog import Catalog, question_files
from env_core.demo import resolve_data_dir
from env_core.errors import DataError
from env_core.gold_queries import GoldBounds
from env_core.layouts import detect_layout
from env_core.manager import EpisodeManager, executor_limits
from env_core.mixed_catalog import MixedCatalog, check_question_files, data_entries
from env_core.settings import Settings


def open_manager(settings: Settings | None = None, **changes: Any) -> EpisodeManager:
    """A episode manager under `settings` (default: the defaults with the `SQLENV_*`
    variables applied), with `changes` made to them, e.g. `open_manager(split="train")`.

    The data directory defaults to the embedded demo; only the served split is prepared (or
    read from the cache).
    """
    settings = (settings or Settings.from_environment()).replace(**changes)
    catalog = load_catalog(settings)
    split = catalog.splits[settings.split]
    if not split.questions:
        reasons = "; ".join(f"{why}: {n}" for why, n in split.exclusion_counts().most_common())
        raise DataError(
            f"split {settings.split!r} has no question an episode can ask: all "
            f"{len(split.excluded)} were excluded ({reasons or 'the question file is empty'})"
        )
    return EpisodeManager(catalog, settings)


@functools.cache
def _shared(changes: frozenset) -> EpisodeManager:
    return open_manager(**dict(changes))


def shared_manager(**changes: Any) -> EpisodeManager:
    """One episode manager per process for these `changes` (those given as None left out),
    opened at the first call: for frameworks that make a door's objects many times over
    (a task per eval, an environment per trajectory) and give it no engine."""
    return _shared(frozenset((name, value) for name, value in changes.items() if value is not None))


def load_catalog(
    settings: Settings, splits: list[str] | None = None, **options: Any
) -> Catalog | MixedCatalog:
    """The catalog of the settings' data location: their split, or `splits`; of several
    datasets when it names several (`env_core.mixed_catalog`). Its gold queries run under the
    agent's limits, so a gold the agent could not run is excluded. `options`: `Catalog.load`'s
    `refresh` and `progress`."""
    root, databases_dir, cache_dir = data_location(settings)
    golds = GoldBounds(executor_limits(settings), settings.sql_memory_mb, settings.sql_workers)

    def load(data_dir: Path, names: list[str]) -> Catalog:
        return Catalog.load(
            data_dir,
            names,
            cache_dir=cache_dir,
            golds=golds,
            databases_dir=databases_dir,
            evidence=settings.evidence,
            **options,
        )

    entries = data_entries(str(root), databases_dir)
    if entries is None:
        return load(root, splits or [settings.split])
    return MixedCatalog.load(entries, splits or [settings.split], databases_dir, load)


def check_split(settings: Settings) -> None:
    """`DataError` listing the splits there are unless the settings' split has a question
    file (in each dataset named); for a server that loads a split's catalog only when a
    request asks for it."""
    root, databases_dir, _ = data_location(settings)
    entries = data_entries(str(root), databases_dir)
    if entries is None:
        detect_layout(root, databases_dir).question_file(settings.split)
    else:
        check_question_files(entries, [settings.split], databases_dir)


def split_names(settings: Settings) -> list[str]:
    """The splits of the settings' data directory: its question files."""
    root, databases_dir, _ = one_dataset(settings)
    return list(question_files(root, databases_dir))


def data_location(settings: Settings) -> tuple[Path, Path | None, Path | None]:
    """The data location the settings name, its databases folder and the cache folder."""
    cache_dir = Path(settings.cache_dir) if settings.cache_dir else None
    databases_dir = Path(settings.databases_dir) if settings.databases_dir else None
    return resolve_data_dir(settings.data_dir, cache_dir), databases_dir, cache_dir


def one_dataset(settings: Settings) -> tuple[Path, Path | None, Path | None]:
    """`data_location` for what reads one dataset at a time; `DataError` if it names several."""
    location = data_location(settings)
    if data_entries(str(location[0]), location[1]) is not None:
        raise DataError("this command reads one dataset at a time: give it each folder on its own")
    return location
