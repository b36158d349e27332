"""Fixtures of the TRL door's tests: an engine over the Spider dev questions."""

from __future__ import annotations

import os

import pytest

from env_core.manager import EpisodeManager
from env_core.settings import Settings

SPIDER_DEV = "dev_without_wta_1"

# Nothing in these tests may reach a model hub.
for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ[name] = "1"
os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"


@pytest.fixture
def spider_manager(spider_catalog) -> EpisodeManager:
    manager = EpisodeManager(spider_catalog, Settings(split=SPIDER_DEV))
    yield manager
    manager.shutdown()
