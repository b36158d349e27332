"""Explorer mode describes a virtual table by its definition and never reads it in the server:
reading one runs its module, which may run a view of the user's file."""

import pytest
from sdk_client import connect
from test_mcp_explorer_files import make_database

from env_core.executor_limits import ExecutorLimits
from sqlenv_mcp.explorer import UserDatabases
from sqlenv_mcp.server import build_explorer_server

pytestmark = pytest.mark.anyio
FTS5 = "CREATE VIRTUAL TABLE ft USING fts5(x, content='v', content_rowid='x')"


@pytest.fixture
def indexed_view(tmp_path):
    return make_database(
        tmp_path / "notes.sqlite",
        "CREATE TABLE plain(a, b); INSERT INTO plain VALUES (1, 'x');"
        "CREATE VIEW v AS SELECT 1 AS x UNION ALL SELECT 2;" + FTS5,
    )


async def test_a_virtual_table_is_described_by_its_definition(indexed_view):
    databases = UserDatabases.from_path(indexed_view, ExecutorLimits())
    async with connect(build_explorer_server(databases)) as client:
        described = await client.call_tool("describe", {"table": "ft"})
        assert not described.isError
        assert described.content[0].text == (
            "virtual table ft: virtual tables cannot be sampled or queried here\n"
            f"definition:\n  {FTS5}"
        )
        data = described.structuredContent["data"]
        assert (data["definition"], data["row_count"], data["columns"]) == (FTS5, None, [])
        sampled = await client.call_tool("sample", {"table": "ft"})
        assert sampled.isError and "not allowed" in sampled.content[0].text
        plain = await client.call_tool("describe", {"table": "plain"})
        assert plain.content[0].text.startswith("table plain: 1 rows\ncolumns:\n  a untyped")
    databases.close()
