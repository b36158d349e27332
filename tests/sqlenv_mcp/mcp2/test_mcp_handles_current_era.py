"""Episode handles in the 2026-07-28 protocol, where a handle is all a call has to name its
episode: end_episode checks a handle as every other tool does (tests/sqlenv_mcp/
test_mcp_handles.py), so a handle this server did not issue is refused saying why, in a
short message, and ends nothing.

Before, end_episode took any text: it answered a forged or altered handle "Episode ... was not
open." as a success, and echoed the text whole (a 200,000-character handle came back twice, in
a 400 KB answer)."""

import pytest
from mcp import Client

pytestmark = pytest.mark.anyio
CURRENT = "2026-07-28"


async def test_end_episode_refuses_a_handle_this_server_did_not_issue(http_server):
    server = http_server()
    async with Client(f"{server.url}/mcp", mode=CURRENT) as client:
        started = await client.call_tool("start_episode", {"seed": 1})
        handle = started.structured_content["episode_id"]
        server_id, nonce, check = handle.split(".")
        cases = {
            handle + "0" * 200_000: "that is no episode id a server gives",
            handle[:-1]: "that is no episode id a server gives (cut short or altered?)",
            handle[:-1] + "\u0430": "that is no episode id a server gives",  # Cyrillic a
            handle.upper(): "that is no episode id a server gives",
            f"{server_id}.{nonce}.{'1' if check[0] == '0' else '0'}{check[1:]}": "its check "
            "does not match: altered or forged",
            f"{'0' if server_id[0] != '0' else '1'}{handle[1:]}": "it was started on another "
            "server",
        }
        for given, reason in cases.items():
            refused = await client.call_tool("end_episode", {"episode_id": given})
            message = refused.content[0].text
            assert refused.is_error and reason in message, (given[:80], message[:200])
            assert message.startswith("Error: no open episode '") and len(message) < 400
        # The episode was not ended: it still takes calls.
        after = await client.call_tool("query", {"sql": "SELECT 1", "episode_id": handle})
        assert not after.is_error
        ended = await client.call_tool("end_episode", {"episode_id": handle})
        assert ended.structured_content == {"episode_id": handle, "closed": True}
    assert server.health()["episodes"]["active"] == 0
