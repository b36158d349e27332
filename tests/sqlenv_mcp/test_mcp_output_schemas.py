"""Every tool's output schema is flat draft-07 and describes what the tool returns, errors and
refusals included: clients validate each structured result against it."""

import pytest
from jsonschema import validators
from sdk_client import connect

from sqlenv_mcp.results import SCHEMA_DIALECT
from sqlenv_mcp.server import build_episode_server

pytestmark = pytest.mark.anyio
DEV = "dev_without_wta_1"

CALLS = [
    ("start_episode", {"question_id": "nope:1"}),
    ("describe", {"table": "singer"}),
    ("start_episode", {"question_id": f"{DEV}:1"}),
    ("describe", {"table": "singer"}),
    ("describe", {"table": "no_such_table"}),
    ("sample", {"table": "singer", "n": 3}),
    ("query", {"sql": "SELECT name, age FROM singer"}),
    ("query", {"sql": "DELETE FROM singer"}),
    ("answer", {"value": "[]"}),
    ("query", {"sql": "SELECT 1"}),
    ("end_episode", {}),
    ("end_episode", {"episode_id": "nope"}),
]


async def test_each_result_validates_against_its_tools_flat_draft_07_schema(manager):
    async with connect(build_episode_server(manager)) as client:
        schemas = {tool.name: tool.outputSchema for tool in (await client.list_tools()).tools}
        results = [(tool, await client.call_tool(tool, arguments)) for tool, arguments in CALLS]
    for name, schema in schemas.items():
        assert schema["$schema"] == SCHEMA_DIALECT, name
        for field in schema["properties"].values():
            assert set(field) <= {"type", "description", "items"}, (name, field)
        validators.validator_for(schema).check_schema(schema)
    assert [result.isError for _, result in results] == [
        True, True, False, False, True, False, False, True, False, True, False, True
    ]  # fmt: skip
    for tool, result in results:
        validator = validators.validator_for(schemas[tool])(schemas[tool])
        assert list(validator.iter_errors(result.structuredContent)) == [], (tool, result)
