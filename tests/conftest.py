import importlib.util
import os
from pathlib import Path

import pytest

# The verifiers door's tests need verifiers, which cannot share this environment (it needs
# mcp 2, OpenEnv mcp<2): `make test` runs them in the door's own (.venv-verifiers) after this run.
collect_ignore = [] if importlib.util.find_spec("verifiers") else ["doors/verifiers"]


@pytest.fixture(scope="session")
def spider_dir() -> Path:
    """The shared Spider data directory beside the repository (never copied into it)."""
    # parents[1] is the repository root, since this file sits directly in tests/.
    path = (Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "spider").resolve()
    if not path.is_dir():
        pytest.fail(f"Spider data directory not found at {path}; the tests need it there")
    return path


SPIDER_DEV = "dev_without_wta_1"
SPIDER_SPLITS = (SPIDER_DEV, "train_spider_min")


@pytest.fixture(scope="session", autouse=True)
def cache_dir(tmp_path_factory) -> Path:
    """One catalog cache for the whole test run, so each split is prepared once; also the
    default cache of everything the tests start, so nothing is written to the home folder."""
    path = tmp_path_factory.mktemp("sqlenv-cache")
    os.environ["SQLENV_CACHE_DIR"] = str(path)
    return path


@pytest.fixture(scope="session", autouse=True)
def run_keys(cache_dir) -> None:
    """Where the run folders of the whole test run keep their keys, for this process and
    everything it starts, so nothing is written to the home folder."""
    os.environ["XDG_STATE_HOME"] = str(cache_dir.parent / "state")


@pytest.fixture(scope="session")
def spider_catalog(spider_dir, cache_dir):
    from env_core.catalog import Catalog

    return Catalog.load(spider_dir, SPIDER_SPLITS, cache_dir=cache_dir)


@pytest.fixture
def spider_manager(spider_catalog):
    """An episode manager over the Spider dev questions, shut down after the test."""
    from env_core.manager import EpisodeManager
    from env_core.settings import Settings

    manager = EpisodeManager(spider_catalog, Settings(split=SPIDER_DEV))
    yield manager
    manager.shutdown()


@pytest.fixture(scope="session")
def demo_catalog(cache_dir):
    from env_core.catalog import Catalog
    from env_core.demo import demo_data_dir

    return Catalog.load(demo_data_dir(cache_dir), ["dev"], cache_dir=cache_dir)


@pytest.fixture(scope="session")
def dev_door_spec(spider_dir, cache_dir, spider_catalog):
    """The eval harness's door spec for Spider dev; servers started from it start warm."""
    from env_core.settings import Settings
    from evals.door_clients import DoorSpec

    settings = Settings(
        data_dir=str(spider_dir), split="dev_without_wta_1", cache_dir=str(cache_dir)
    )
    return DoorSpec("inprocess", settings)


@pytest.fixture(scope="session")
def large_bird_dir(tmp_path_factory) -> Path:
    """A BIRD-layout folder whose one database is ~300 MB (4,000,000 rows), built for the run
    by scripts/dataset_fixtures.py in a few seconds, never committed."""
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("large") / "bird-large"
    script = Path(__file__).resolve().parents[1] / "scripts" / "dataset_fixtures.py"
    subprocess.run(
        [sys.executable, str(script), "bird-large", str(folder)], check=True, timeout=120
    )
    return folder
