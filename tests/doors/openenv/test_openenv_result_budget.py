"""The bytes a result puts on the wire are bounded whatever the door: through the OpenEnv server,
a result's structured rows, counted as JSON writes them, stay within the result's budget."""

from __future__ import annotations

import json

import pytest

from doors.openenv.client import SQLEnvClient
from env_core.executor_limits import ExecutorLimits

pytestmark = pytest.mark.anyio
BUDGET = ExecutorLimits().max_result_chars
# 40 rows of five cells of 500 quotes, each written twice as long in JSON as in the text.
QUOTES = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 40), "
    "q(v) AS (SELECT replace(hex(zeroblob(250)), '0', '\"')) "
    "SELECT v, v, v, v, v FROM q, c"
)


async def test_structured_rows_of_quotes_stay_within_the_budget(spider_server):
    async with SQLEnvClient(base_url=spider_server) as env:
        await env.reset(seed=0)
        result = await env.query(QUOTES)
    data = result.observation.data
    assert result.observation.ok and data["rows"] and data["truncated"], result.observation.text
    assert data["rows"][0][0] == '"' * 500
    rows = len(json.dumps({"columns": data["columns"], "rows": data["rows"]}, ensure_ascii=False))
    assert rows <= BUDGET, f"{rows:,} characters of structured rows"
