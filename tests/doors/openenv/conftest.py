"""Fixtures of the OpenEnv door's tests: Spider settings and servers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from openenv_testing import SPIDER_SPLIT, running_server

from env_core.settings import Settings


@pytest.fixture(scope="session")
def spider_settings(spider_dir, cache_dir, spider_catalog) -> Settings:
    # spider_catalog has prepared the split in cache_dir, so servers start warm.
    return Settings(data_dir=str(spider_dir), split=SPIDER_SPLIT, cache_dir=str(cache_dir))


@pytest.fixture(scope="module")
def spider_server(spider_settings) -> Iterator[str]:
    with running_server(replace(spider_settings, max_episodes=16)) as url:
        yield url


@pytest.fixture
def start_server(spider_settings):
    """Start a Spider server with other settings: `with start_server(max_episodes=2) as url:`;
    `port=` starts it at the address of one stopped."""

    def start(port: int = 0, **changes: Any):
        return running_server(replace(spider_settings, **changes), port=port)

    return start


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
