"""Fixtures of the engine's tests that run agent SQL through a sandbox on concert_singer."""

from __future__ import annotations

import pytest

from env_core.executor import ReadOnlyExecutor
from env_core.sandbox import Sandbox

CONCERT = "concert_singer"


@pytest.fixture
def sandbox():
    pool = Sandbox(workers=1, memory_mb=64)
    yield pool
    pool.close()


@pytest.fixture
def open_executor(spider_dir, sandbox):
    """Opens executors on concert_singer with `sandbox`, and closes them after the test."""
    opened = []

    def open_executor(*, immutable: bool = True) -> ReadOnlyExecutor:
        path = spider_dir / "database" / CONCERT / f"{CONCERT}.sqlite"
        opened.append(ReadOnlyExecutor(path, immutable=immutable, sandbox=sandbox))
        return opened[-1]

    yield open_executor
    for executor in opened:
        executor.close()
