"""Playing the OpenEnv `/web` page in headless Chromium (Debian's, driven by Playwright, which
downloads no browser of its own), checked call by call against the engine in process."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from playwright.sync_api import Page, sync_playwright

from doors.openenv.models import tool_arguments
from env_core.answers import gold_as_json
from env_core.catalog import Catalog
from env_core.manager import EpisodeManager

CHROMIUM = "/usr/bin/chromium"


@contextmanager
def browser_page(url: str) -> Iterator[Page]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: scripts/install-browser.sh installs it")
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(url)
            yield page
        finally:
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


def play_on_web(
    page: Page, catalog: Catalog, question_id: str, calls: list[tuple[str, str]]
) -> tuple[str, str, float]:
    """Start `question_id` on the page and make `calls`, asserting that the page shows the
    engine's opening, texts and rewards; returns the last text, outcome and total reward."""
    manager = EpisodeManager(catalog)
    expected_episode = manager.create(question_id=question_id)
    expected = [expected_episode.call(tool, tool_arguments(tool, arg)) for tool, arg in calls]
    manager.shutdown()

    page.locator("#question-id textarea").fill(question_id)
    page.click("#reset")
    page.wait_for_selector("#episode .sqlenv-text")
    assert page.inner_text("#episode").strip() == expected_episode.start.text

    total = 0.0
    for step, ((tool, argument), result) in enumerate(zip(calls, expected, strict=True), 1):
        text, outcome = run_tool(page, tool, argument, step)
        total += result.reward
        assert text == result.text
        assert outcome.startswith(f"reward {result.reward:+.3f} · total {total:+.3f}")
    return text, outcome, total


def play_gold_episode(page: Page, catalog: Catalog, question_id: str, table: str) -> None:
    """Describe `table`, run the gold SQL and answer its result: a correct episode, start to
    end, as the engine plays it."""
    question = catalog.question(question_id)
    calls = [("describe", table), ("query", question.sql), ("answer", gold_as_json(question.gold))]
    text, outcome, total = play_on_web(page, catalog, question_id, calls)
    assert text == "Correct. The episode is over."
    assert outcome == f"reward +1.000 · total {total:+.3f} · episode over"
