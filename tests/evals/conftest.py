"""Fixtures of the harness tests: door specs over the Spider dev split, sharing one cache."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evals.doors import DoorSpec

DEV = "dev_without_wta_1"


@pytest.fixture(scope="session")
def dev_spec(spider_dir, cache_dir, spider_catalog) -> DoorSpec:
    # spider_catalog has prepared the split in cache_dir, so doors and servers start warm.
    return DoorSpec("inprocess", str(spider_dir), DEV, str(cache_dir))


@pytest.fixture(scope="session")
def spec_for(dev_spec):
    def make(kind: str) -> DoorSpec:
        return replace(dev_spec, kind=kind)

    return make
