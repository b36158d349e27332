"""A database of 303 MB (4,000,000 rows, built in tmp) served over MCP stdio: every bound of
the executor holds through the `query` tool (each hostile statement is stopped by a limit with
the tool's error, within its deadline, in bounded memory), a plain question is answered right,
and the file is unchanged."""

import hashlib
import time

import pytest
from mcp_processes import stdio_session
from process_memory import MIB, PeakRSS

from env_core.errors import QueryRejectedError
from env_core.render import error_text
from env_core.sandbox import GRACE_S
from env_core.sandbox_worker import HEADROOM_BYTES
from env_core.settings import Settings

pytestmark = pytest.mark.anyio
DATABASE = ("dev_databases", "gauge_log", "gauge_log.sqlite")
OVER_MEMORY = error_text(QueryRejectedError.over_memory(Settings.sql_memory_mb))
TIME_LIMIT = "time limit"
# Hostile statements and what may stop each: on a loaded machine a memory-hungry statement
# may reach the deadline first.
HOSTILE = {
    "SELECT COUNT(*) FROM readings AS a, readings AS b": (TIME_LIMIT, OVER_MEMORY),
    "SELECT COUNT(DISTINCT note) FROM readings": (OVER_MEMORY, TIME_LIMIT),
    "SELECT note FROM readings ORDER BY note || id": (OVER_MEMORY, TIME_LIMIT),
    "SELECT group_concat(note) FROM readings": ("size limit",),
}


def file_fingerprint(path) -> tuple:
    with path.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    stat = path.stat()
    return digest, stat.st_size, stat.st_mtime_ns


async def test_every_bound_holds_on_a_large_database_through_the_query_tool(
    large_bird_dir, cache_dir, tmp_path
):
    database = large_bird_dir.joinpath(*DATABASE)
    assert database.stat().st_size > 300 * 10**6
    before = file_fingerprint(database)
    arguments = ("--data-dir", str(large_bird_dir), "--cache-dir", str(cache_dir))
    async with stdio_session(tmp_path / "server.log", *arguments) as (client, _):
        started = await client.call_tool("start_episode", {"question_id": "dev:0"})
        assert "Database: gauge_log" in started.content[0].text
        with PeakRSS() as peak:
            for sql, limits in HOSTILE.items():
                began = time.monotonic()
                result = await client.call_tool("query", {"sql": sql})
                took = time.monotonic() - began
                shown = result.content[0].text.split("\n")[0]
                assert result.isError and any(limit in shown for limit in limits), (sql, shown)
                assert took < Settings.query_timeout_s + GRACE_S + 1.0, (sql, took)
            many = await client.call_tool("query", {"sql": "SELECT * FROM readings"})
            assert not many.isError and many.structuredContent["data"]["truncated"]
            assert "(20 rows shown; more exist" in many.content[0].text
            answered = await client.call_tool("answer", {"value": "4000000"})
        assert answered.content[0].text.startswith("Correct.")
    workers = Settings().sql_workers
    bound = workers * (Settings.sql_memory_mb * MIB + HEADROOM_BYTES)
    assert peak.bytes - peak.before < bound, peak.growth_mib
    assert file_fingerprint(database) == before
    assert sorted(p.name for p in database.parent.iterdir()) == ["gauge_log.sqlite"]
