"""Fixtures of the deployment tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest


@pytest.fixture(scope="module")
def say(pytestconfig) -> Callable[[str], None]:
    """Print a line in the test run's output, even while output is captured."""
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    terminal = pytestconfig.pluginmanager.get_plugin("terminalreporter")

    def write(line: str) -> None:
        with capture.global_and_fixture_disabled():
            terminal.write_line(line)

    return write
