"""Fixtures of the SkyRL door's tests: an engine over the Spider dev questions."""

from __future__ import annotations

import pytest

from env_core.manager import EpisodeManager
from env_core.settings import Settings

SPIDER_DEV = "dev_without_wta_1"


@pytest.fixture
def spider_manager(spider_catalog) -> EpisodeManager:
    manager = EpisodeManager(spider_catalog, Settings(split=SPIDER_DEV))
    yield manager
    manager.shutdown()
