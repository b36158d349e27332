"""Every attack of the engine's corpus, sent through a stdio MCP server: the same outcome as
in process, the server stays up, and no database file changes."""

import pytest
from adversarial import ATTACKS, snapshot
from mcp_processes import stdio_session

from env_core.errors import QueryRejectedError, ToolError
from env_core.executor import ReadOnlyExecutor
from env_core.executor_limits import ExecutorLimits
from env_core.manager import SessionConfig
from env_core.render import error_text

pytestmark = pytest.mark.anyio
TIMEOUT_S = 0.5
OVER_MEMORY = error_text(QueryRejectedError.over_memory(SessionConfig().sql_memory_mb))


async def test_corpus_through_mcp(spider_dir, cache_dir, tmp_path):
    database_dir = spider_dir / "database"
    before = snapshot(database_dir)
    fill = {"database_dir": str(database_dir), "tmp": str(tmp_path)}
    arguments = (
        "--data-dir",
        str(spider_dir),
        "--split",
        "dev_without_wta_1",
        "--cache-dir",
        str(cache_dir),
        "--max-steps",
        "1000",
        "--query-timeout",
        str(TIMEOUT_S),
    )
    executors: dict[str, ReadOnlyExecutor] = {}
    async with stdio_session(tmp_path / "server.log", *arguments) as (client, _):
        for db in sorted({attack.db for attack in ATTACKS}):
            started = await client.call_tool("start_episode", {"db_id": db, "seed": 0})
            path = database_dir / db / f"{db}.sqlite"
            executors[db] = ReadOnlyExecutor(path, ExecutorLimits(timeout_s=TIMEOUT_S))
            episode_id = started.structuredContent["episode_id"]
            for attack in (a for a in ATTACKS if a.db == db):
                sql = attack.render(attack.sql, **fill)
                result = await client.call_tool("query", {"sql": sql, "episode_id": episode_id})
                try:
                    executors[db].query(sql)
                    expected_error = None
                except ToolError as error:
                    expected_error = error_text(error)
                if expected_error is None:
                    assert not result.isError, (attack.id, result.content[0].text)
                    continue
                assert result.isError, attack.id
                shown = result.content[0].text.split("\n")[0]
                if attack.outcome == "stopped":
                    # The server's SQL runs in a sandbox worker with a memory budget as
                    # well as the deadline: a runaway query is stopped by whichever it
                    # reaches first.
                    assert shown in (expected_error, OVER_MEMORY), attack.id
                else:
                    assert shown == expected_error, attack.id
            healthy = await client.call_tool(
                "query", {"sql": "SELECT count(*) FROM sqlite_master", "episode_id": episode_id}
            )
            assert not healthy.isError
    for executor in executors.values():
        executor.close()
    assert snapshot(database_dir) == before
