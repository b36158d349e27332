"""A result read from a file that never changes is kept and given again without running any SQL,
for the executor that read it only, until it closes (even while a call is running, and whoever
owns the episodes); never a result of chance or the clock, nor one from a file that may change.
What is kept stays within its bound, in memory as Python counts it, after a door has sent it."""

from __future__ import annotations

import gc
import sqlite3
import tracemalloc

import pytest
from mcp.types import JSONRPCMessage, JSONRPCResponse

from env_core.errors import QueryRejectedError
from env_core.executor import ReadOnlyExecutor
from env_core.manager import EpisodeManager
from env_core.reuse import KEPT, PROVEN
from env_core.settings import Settings
from sqlenv_mcp.results import step_result

CONCERT = "concert_singer"
DEV = "dev_without_wta_1"
# A function: the sandbox runs it first.
CHEAP = "SELECT Name, Age FROM singer WHERE Age > 30 ORDER BY abs(Age)"
# ~30 ms in a worker, too slow to be proven cheap (see PROVEN): only a kept result skips it.
SLOW = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000) "
    "SELECT count(*) FROM c"
)


def test_a_sample_asked_again_is_the_result_kept(open_executor):
    executor = open_executor()
    first = executor.sample("singer", 3)
    assert executor.sample("singer", 3) is first
    assert executor.sample("Singer", 3) is first  # the same table, however it is named
    assert len(executor.sample("singer", 4).rows) == 4


def test_a_query_asked_again_is_answered_with_no_sql_run(open_executor, sandbox):
    executor = open_executor()
    cheap, slow = executor.query(CHEAP), executor.query(SLOW)
    sandbox.close()  # nothing can run in a worker any more
    assert executor.query(CHEAP) is cheap
    assert executor.query(SLOW) is slow
    with pytest.raises(QueryRejectedError, match="shutting down"):
        executor.query(SLOW, max_rows=5)  # another result: it would have to run


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT random()",
        "SELECT hex(randomblob(8))",
        "SELECT strftime('%f', 'now'), julianday('now')",
    ],
)
def test_a_result_of_chance_or_the_clock_is_never_kept(open_executor, sql):
    executor = open_executor()
    first = executor.query(sql)
    again = executor.query(sql)
    assert again is not first
    assert not first.repeatable


def test_nothing_read_from_a_file_that_may_change_is_kept(tmp_path, sandbox):
    path = tmp_path / "garden.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE plant(name TEXT)")
        connection.execute("INSERT INTO plant VALUES ('fern')")
    executor = ReadOnlyExecutor(path, immutable=False, sandbox=sandbox)
    try:
        assert executor.sample("plant").rows == (("fern",),)
        assert executor.query("SELECT count(*) FROM plant").rows == ((1,),)
        with sqlite3.connect(path) as connection:
            connection.execute("INSERT INTO plant VALUES ('basil')")
        assert executor.sample("plant").rows == (("fern",), ("basil",))
        assert executor.query("SELECT count(*) FROM plant").rows == ((2,),)
    finally:
        executor.close()


def test_results_are_kept_for_their_own_executor_only(open_executor):
    """Another episode manager (another assessment) opens its own executor on the file."""
    mine, theirs = open_executor(), open_executor()
    assert theirs.sample("singer") is not mine.sample("singer")
    assert theirs.query(CHEAP) is not mine.query(CHEAP)


def test_an_executor_closing_lets_its_results_go(spider_dir, sandbox):
    path = spider_dir / "database" / CONCERT / f"{CONCERT}.sqlite"
    executor = ReadOnlyExecutor(path, sandbox=sandbox)
    before = KEPT.bytes
    executor.sample("singer")
    executor.query(CHEAP)
    assert KEPT.bytes > before
    executor.share().close()  # another user leaving keeps them
    assert KEPT.bytes > before
    executor.close()
    assert KEPT.bytes == before


def test_a_manager_shutting_down_lets_its_results_go(spider_catalog):
    before = KEPT.bytes
    manager = EpisodeManager(spider_catalog, Settings(split="dev_without_wta_1"))
    episode = manager.create(question_id="dev_without_wta_1:1")
    for _ in range(2):
        assert episode.call("sample", {"table": "singer"}).ok
        assert episode.call("query", {"sql": CHEAP}).ok
    assert KEPT.bytes > before
    manager.shutdown()
    assert KEPT.bytes == before


def test_an_episode_pays_for_a_kept_result_like_any_other(spider_catalog):
    manager = EpisodeManager(spider_catalog, Settings(split="dev_without_wta_1"))
    try:
        episode = manager.create(question_id="dev_without_wta_1:1")
        first = episode.call("query", {"sql": CHEAP})
        again = episode.call("query", {"sql": CHEAP})
        assert again.data == first.data
        assert again.reward < first.reward  # the repeat penalty, as before
        assert episode.budget_left == episode.max_steps - 2
    finally:
        manager.shutdown()


def test_kept_results_stay_within_their_bound_in_memory(open_executor, monkeypatch):
    """800 results of 420 cells of emoji (four bytes a character: 57 KiB each, 45 MiB in all)
    into 4 MiB; the statements' proofs (`PROVEN`) hold ~1.1 MiB beside. A result over the bound
    for one result is not kept at all."""
    monkeypatch.setattr(KEPT, "max_bytes", KEPT.bytes + (4 << 20))
    executor = open_executor()
    wide = ", ".join(f"'{chr(0x1F600 + n) * 11}'" for n in range(20))
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        results = []
        for n in range(800):
            results.append(executor.query(f"SELECT {n}, {wide} FROM singer, singer, singer"))
            results = results[-1:]  # the caller lets go of all but the newest
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert KEPT.bytes <= KEPT.max_bytes
    assert grown < (4 << 20) + (3 << 19)
    newest = f"SELECT 799, {wide} FROM singer, singer, singer"
    assert executor.query(newest) is results[-1]
    monkeypatch.setattr(KEPT, "max_result_bytes", 100)
    assert executor.query(CHEAP) is not executor.query(CHEAP)


def held_by_kept(serial: int) -> tuple[int, int]:
    """(bytes counted, bytes really freed) when the executor's kept results are let go."""
    gc.collect()
    counted, before = KEPT.bytes, tracemalloc.get_traced_memory()[0]
    KEPT.forget(serial)
    gc.collect()
    return counted - KEPT.bytes, before - tracemalloc.get_traced_memory()[0]


def send_over_mcp(episode_id: str, result) -> str:
    """What the MCP stdio / streamable HTTP transports do with a tool's result."""
    dumped = step_result(episode_id, result).model_dump(
        by_alias=True, mode="json", exclude_none=True
    )
    message = JSONRPCMessage(JSONRPCResponse(jsonrpc="2.0", id=1, result=dumped))
    return message.model_dump_json(by_alias=True, exclude_none=True)


def test_non_ascii_results_sent_over_mcp_hold_no_more_than_counted(spider_catalog):
    """Latin-1 text takes a byte a character until pydantic's JSON encoder caches its UTF-8
    form in the string, then three."""
    manager = EpisodeManager(spider_catalog, Settings(split=DEV))
    text = "\u00e9" * 480
    tracemalloc.start()
    try:
        episode = manager.create(question_id=f"{DEV}:1")
        for n in range(12):
            sql = (
                f"WITH RECURSIVE c(x) AS (SELECT {n} UNION ALL SELECT x + 1 FROM c LIMIT 20) "
                f"SELECT '{text}' || x FROM c"
            )
            result = episode.call("query", {"sql": sql})
            assert result.ok
            send_over_mcp(episode.episode_id, result)
            del result
        serial = episode.executor._serial
        manager.close(episode.episode_id)
        del episode  # with its history: only KEPT holds the results now
        counted, real = held_by_kept(serial)
    finally:
        tracemalloc.stop()
        manager.shutdown()
    assert counted > 0
    assert real <= counted, f"kept results hold {real} bytes, counted as {counted}"


def test_small_results_hold_no_more_than_counted(open_executor, monkeypatch):
    executor = open_executor()
    """An entry's own objects weigh most in a small result. PROVEN, which shares the
    statement's text, keeps only the newest 2,048 statements: it is kept out of the way here,
    as it is for most of 32 MiB of small results."""
    monkeypatch.setattr(PROVEN, "PROOF_MS", -1.0)
    tracemalloc.start()
    try:
        for n in range(600):
            executor.query(f"SELECT {n} + 1000")
        counted, real = held_by_kept(executor._serial)
    finally:
        tracemalloc.stop()
    assert counted > 0
    assert real <= counted, f"kept results hold {real} bytes, counted as {counted}"


def answered_while_closing(work, close) -> None:
    """Drive a call whose worker answers while `close` runs."""
    runner, job = next(work)
    outcome = runner.run(job)
    close()
    with pytest.raises(StopIteration):
        work.send(outcome)


def test_a_result_arriving_after_its_executor_closed_is_not_kept(spider_dir, sandbox):
    path = spider_dir / "database" / CONCERT / f"{CONCERT}.sqlite"
    executor = ReadOnlyExecutor(path, sandbox=sandbox)
    before = KEPT.bytes
    answered_while_closing(executor.query_work(CHEAP), executor.close)
    assert KEPT.bytes == before


def test_a_step_in_flight_at_shutdown_leaves_nothing_kept(spider_catalog):
    before = KEPT.bytes
    manager = EpisodeManager(spider_catalog, Settings(split=DEV))
    episode = manager.create(question_id=f"{DEV}:1")
    work = manager.work(episode.episode_id, "query", {"sql": CHEAP})
    answered_while_closing(work, manager.shutdown)
    assert KEPT.bytes == before


def test_shutdown_lets_go_of_the_results_of_owned_episodes(spider_catalog):
    """Every MCP connection's episodes have an owner, as have an assessment's seats."""
    before = KEPT.bytes
    manager = EpisodeManager(spider_catalog, Settings(split=DEV))
    episode = manager.create(question_id=f"{DEV}:1", owner="connection-1")
    assert episode.call("query", {"sql": CHEAP}).ok
    assert KEPT.bytes > before
    manager.shutdown()
    assert KEPT.bytes == before
