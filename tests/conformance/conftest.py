import pytest


@pytest.fixture(scope="session")
def conformance_spec(spider_dir, cache_dir, spider_catalog):
    from evals.doors import DoorSpec

    # spider_catalog has prepared the split in cache_dir, so every server starts warm.
    return DoorSpec("inprocess", str(spider_dir), "dev_without_wta_1", str(cache_dir))
