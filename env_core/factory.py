"""One way for every door to build its episode manager: from `Settings`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from env_core.catalog import Catalog
from env_core.demo import resolve_data_dir
from env_core.errors import DataError
from env_core.layouts import detect_layout
from env_core.manager import EpisodeManager, SessionConfig
from env_core.mixed_catalog import MixedCatalog, check_question_files, data_entries
from env_core.settings import Settings


def open_manager(settings: Settings | None = None, **changes: Any) -> EpisodeManager:
    """A episode manager under `settings` (default: the defaults with the `SQLENV_*`
    variables applied), with `changes` made to them, e.g. `open_manager(split="train")`.

    The data directory defaults to the embedded demo; only the served split is prepared (or
    read from the cache).
    """
    settings = (settings or Settings.from_environment()).replace(**changes)
    config = SessionConfig.of(settings)
    catalog = load_catalog(settings)
    split = catalog.splits[settings.split]
    if not split.questions:
        reasons = "; ".join(f"{why}: {n}" for why, n in split.exclusion_counts().most_common())
        raise DataError(
            f"split {settings.split!r} has no question an episode can ask: all "
            f"{len(split.excluded)} were excluded ({reasons or 'the question file is empty'})"
        )
    return EpisodeManager(catalog, config)


def load_catalog(settings: Settings, splits: list[str] | None = None) -> Catalog | MixedCatalog:
    """The catalog of the settings' data location: their split, or `splits`; of several
    datasets when it names several (`env_core.mixed_catalog`)."""
    cache_dir = Path(settings.cache_dir) if settings.cache_dir else None
    root = resolve_data_dir(settings.data_dir, cache_dir)
    limits = SessionConfig.of(settings).limits
    databases_dir = _databases_dir(settings)

    def load(data_dir: Path, names: list[str]) -> Catalog:
        return Catalog.load(
            data_dir,
            names,
            cache_dir=cache_dir,
            limits=limits,
            databases_dir=databases_dir,
            evidence=settings.evidence,
        )

    entries = data_entries(str(root), databases_dir)
    if entries is None:
        return load(root, splits or [settings.split])
    return MixedCatalog.load(entries, splits or [settings.split], databases_dir, load)


def check_split(settings: Settings) -> None:
    """`DataError` listing the splits there are unless the settings' split has a question
    file; for a server that loads a split's catalog only when a request asks for it."""
    cache_dir = Path(settings.cache_dir) if settings.cache_dir else None
    root = resolve_data_dir(settings.data_dir, cache_dir)
    entries = data_entries(str(root), _databases_dir(settings))
    if entries is None:
        detect_layout(root, _databases_dir(settings)).question_file(settings.split)
    else:
        check_question_files(entries, [settings.split], _databases_dir(settings))


def _databases_dir(settings: Settings) -> Path | None:
    return Path(settings.databases_dir) if settings.databases_dir else None
