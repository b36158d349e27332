"""Resource attacks through the MCP and OpenEnv servers, each a real process on 127.0.0.1: every
call ends within its deadline + 1 s with a clear error, the server's memory (its process and
its SQL workers) stays within the per-call budget (N budgets for N calls at once), normal calls
keep working during and after, and no database file changes."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from itertools import cycle

import httpx
import pytest
from adversarial import CONCERT, HOSTILE_ANSWERS, RESOURCE_ATTACKS, snapshot
from process_memory import MIB, PeakRSS
from served_episodes import Call, episode

from env_core.sandbox_worker import HEADROOM_BYTES
from serving.local_server import LocalServer

pytestmark = pytest.mark.anyio
DEV = "dev_without_wta_1"
TIMEOUT_S = 2.0
MEMORY_MB = 64
# One call may add the budget, a worker's headroom and a fresh worker replacing a spent one.
CALL_BOUND_MIB = MEMORY_MB + HEADROOM_BYTES // MIB + 40
# A function, so a worker runs it the first time (see env_core.programs).
NORMAL_SQL = "SELECT abs(count(*)) FROM singer"
COMMANDS = {
    "mcp": (["-m", "sqlenv_mcp", "--transport", "http"], "/health"),
    "openenv": (["-m", "doors.commands"], "/health"),
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def servers(spider_dir, cache_dir, spider_catalog):
    started: dict[str, LocalServer] = {}
    data = ["--data-dir", str(spider_dir), "--split", DEV, "--cache-dir", str(cache_dir)]
    limits = ["--max-steps", "1000", "--query-timeout", str(TIMEOUT_S)]
    limits += ["--sql-memory", str(MEMORY_MB)]
    try:
        for door, (module, health) in COMMANDS.items():
            command = [sys.executable, *module, *data, *limits]
            started[door] = LocalServer(command, health)
        yield started
    finally:
        for server in started.values():
            server.stop()


@pytest.fixture(scope="module")
def files_before(spider_dir):
    return snapshot(spider_dir / "database")


async def timed(call: Call, tool: str, arguments: dict) -> tuple[str, float]:
    started = time.monotonic()
    text = await call(tool, arguments)
    return text, time.monotonic() - started


@pytest.mark.parametrize("door", COMMANDS)
@pytest.mark.parametrize("attack", RESOURCE_ATTACKS, ids=lambda attack: attack.id)
async def test_one_attack_is_bounded(servers, files_before, door, attack):
    server = servers[door]
    async with episode(door, server.url, attack.db) as call:
        await call("query", {"sql": NORMAL_SQL})  # the workers are up before measuring
        with PeakRSS(server.process.pid) as peak:
            text, elapsed = await timed(call, "query", {"sql": attack.sql})
        assert attack.phrase in text, text[:300]
        assert elapsed < TIMEOUT_S + 1.0, f"took {elapsed:.2f} s"
        assert peak.growth_mib < CALL_BOUND_MIB, f"grew {peak.growth_mib:.0f} MiB"
        after, _ = await timed(call, "query", {"sql": NORMAL_SQL})
        assert after.startswith("abs(count(*))\n6\n"), after


@pytest.mark.parametrize("door", COMMANDS)
async def test_attacks_at_once_stay_within_their_budgets(servers, files_before, door):
    server = servers[door]
    attack = RESOURCE_ATTACKS[0]

    async def attack_once() -> tuple[str, float]:
        async with episode(door, server.url, CONCERT) as call:
            return await timed(call, "query", {"sql": attack.sql})

    async with episode(door, server.url, CONCERT) as bystander:
        await bystander("query", {"sql": NORMAL_SQL})
        with PeakRSS(server.process.pid) as peak:
            attacks = [asyncio.ensure_future(attack_once()) for _ in range(4)]
            await asyncio.sleep(0.2)
            normal, waited = await timed(bystander, "query", {"sql": NORMAL_SQL})
            outcomes = await asyncio.gather(*attacks)
    assert all(attack.phrase in text for text, _ in outcomes), outcomes
    assert max(elapsed for _, elapsed in outcomes) < 2 * (TIMEOUT_S + 1.0)
    assert normal.startswith("abs(count(*))\n6\n"), normal
    assert waited < TIMEOUT_S + 1.0, f"a normal query waited {waited:.2f} s"
    assert peak.growth_mib < 4 * CALL_BOUND_MIB, f"grew {peak.growth_mib:.0f} MiB"


def watch_health(url: str, stop: threading.Event) -> list[tuple[int, float]]:
    """(status, seconds) of a GET `url` every 10 ms until `stop`, at least once. The checks run
    in a thread of their own so that they time the server, not this test's event loop, which
    is busy starting the clients (an import there once took 3 s, and starting eight MCP
    sessions on a loaded machine 0.2-1.2 s, while the server answered within 20 ms)."""
    checks: list[tuple[int, float]] = []
    with httpx.Client(timeout=30) as client:
        while True:
            started = time.monotonic()
            status = client.get(url).status_code
            checks.append((status, time.monotonic() - started))
            if stop.wait(0.01):
                return checks


@pytest.mark.parametrize("door", COMMANDS)
async def test_hostile_answers_never_stall_the_server(servers, door):
    server = servers[door]
    stop = threading.Event()
    health = asyncio.ensure_future(
        asyncio.to_thread(watch_health, server.url + COMMANDS[door][1], stop)
    )

    async def answer(value: str) -> tuple[str, float]:
        async with episode(door, server.url, CONCERT) as call:
            return await timed(call, "answer", {"value": value})

    answers = cycle(HOSTILE_ANSWERS.values())
    try:
        outcomes = await asyncio.gather(*(answer(next(answers)) for _ in range(8)))
    finally:
        stop.set()
    checks = await health
    assert all(text.startswith("Incorrect.") for text, _ in outcomes), outcomes
    assert max(elapsed for _, elapsed in outcomes) < 2.0
    assert {status for status, _ in checks} == {200}, checks
    # A backtracking reader held every client ~1 s per answer: 8 answers, 8 s.
    waited = max(seconds for _, seconds in checks)
    assert waited < 1.0, f"a health check waited {waited:.2f} s"


def test_no_database_file_changed(spider_dir, files_before, servers):
    assert snapshot(spider_dir / "database") == files_before
