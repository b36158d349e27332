"""The /web page in headless Chromium (Debian's, driven by Playwright): one episode, by hand."""

from __future__ import annotations

import pytest
from openenv_testing import running_server
from web_player import browser_page, play_gold_episode

from env_core.demo import demo_data_dir
from env_core.settings import Settings

QUESTION = "dev:15"


@pytest.fixture(scope="module")
def web_url(cache_dir):
    settings = Settings(data_dir=str(demo_data_dir(cache_dir)), cache_dir=str(cache_dir))
    with running_server(settings, web=True) as url:
        yield url


@pytest.fixture
def page(web_url):
    with browser_page(f"{web_url}/web/") as page:
        yield page


def test_play_one_episode_in_the_browser(page, demo_catalog):
    play_gold_episode(page, demo_catalog, QUESTION, "books")
