"""The /web page in headless Chromium (Debian's, driven by Playwright): one episode, by hand."""

from __future__ import annotations

import pytest
from openenv_testing import require_executable, running_server
from playwright.sync_api import Page, sync_playwright

from adapters.openenv.models import tool_arguments
from adapters.openenv.server import ServerSettings
from env_core.answers import gold_as_json
from env_core.demo import demo_data_dir
from env_core.sessions import SessionManager

CHROMIUM = "/usr/bin/chromium"
QUESTION = "dev:15"


@pytest.fixture(scope="module")
def web_url(cache_dir):
    settings = ServerSettings(data_dir=str(demo_data_dir(cache_dir)), cache_dir=cache_dir)
    with running_server(settings, web=True) as url:
        yield url


@pytest.fixture
def page(web_url):
    require_executable(CHROMIUM)
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(f"{web_url}/web/")
        yield page
        browser.close()


def run_tool(page: Page, tool: str, argument: str, step: int) -> tuple[str, str]:
    """Pick the tool, type the argument, run; returns the observation's text and outcome."""
    page.locator("#tool label").filter(has_text=f"{tool}:").click()
    page.locator("#argument textarea").fill(argument)
    page.click("#run")
    page.wait_for_selector(f"#transcript li:nth-child({step})")
    return page.inner_text("#observation .sqlenv-text"), page.inner_text(
        "#observation .sqlenv-outcome"
    )


def test_play_one_episode_in_the_browser(page, demo_catalog):
    question = demo_catalog.question(QUESTION)
    calls = [
        ("describe", "books"),
        ("query", question.sql),
        ("answer", gold_as_json(question.gold)),
    ]
    manager = SessionManager(demo_catalog)
    expected_episode = manager.create(question_id=QUESTION)
    expected = [expected_episode.call(tool, tool_arguments(tool, arg)) for tool, arg in calls]
    manager.shutdown()

    page.locator("#question-id textarea").fill(QUESTION)
    page.click("#reset")
    page.wait_for_selector("#episode .sqlenv-text")
    assert page.inner_text("#episode").strip() == expected_episode.start.text

    total = 0.0
    for step, ((tool, argument), result) in enumerate(zip(calls, expected, strict=True), 1):
        text, outcome = run_tool(page, tool, argument, step)
        total += result.reward
        assert text == result.text
        assert outcome.startswith(f"reward {result.reward:+.3f} · total {total:+.3f}")
    assert text == "Correct. The episode is over."
    assert outcome == f"reward +1.000 · total {total:+.3f} · episode over"
