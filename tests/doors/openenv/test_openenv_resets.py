"""Resets on the OpenEnv server: options that name no question leave the episode running, and
one client holds at most `--max-episodes-per-client` episodes."""

from __future__ import annotations

import httpx
import pytest
from openenv_testing import SPIDER_SPLIT

from doors.openenv.client import SQLEnvClient

pytestmark = pytest.mark.anyio

OPTIONS_NAMING_NO_QUESTION = [
    {"question_id": f"{SPIDER_SPLIT}:99999"},
    {"split": "no_such_split"},
    {"db_id": "no_such_database"},
    {"seed": -1},
    {"question_id": ["a", "list"]},
    {"episode_id": "x" * 201},
]


async def test_a_reset_naming_no_question_is_an_error_and_the_episode_goes_on(spider_server):
    async with SQLEnvClient(base_url=spider_server) as env:
        start = await env.reset(question_id=f"{SPIDER_SPLIT}:1")
        await env.describe("singer")
        for options in OPTIONS_NAMING_NO_QUESTION:
            refused = await env.reset(**options)
            assert refused.done and refused.observation.error, options
        counted = await env.query("SELECT count(*) FROM singer")
        assert counted.observation.data["rows"] == [[6]]
        assert counted.observation.episode_id == start.observation.episode_id
        state = await env.state()
        assert (state.episode_id, state.step_count) == (start.observation.episode_id, 2)
        assert "question_id" not in state.model_dump()  # a key into the public gold


async def test_one_client_holds_at_most_its_share_of_episodes(start_server):
    with start_server(max_episodes=4, max_episodes_per_client=2) as url:
        other_client = {"X-Forwarded-For": "10.0.0.5"}  # uvicorn trusts it from 127.0.0.1
        async with (
            SQLEnvClient(base_url=url) as first,
            SQLEnvClient(base_url=url) as second,
            SQLEnvClient(base_url=url) as third,
            SQLEnvClient(base_url=url, headers=other_client) as other,
        ):
            await first.reset(seed=1)
            await second.reset(seed=2)
            refused = await third.reset(seed=3)
            assert refused.done and refused.observation.data["error"] == "capacity"
            assert "you have 2 episodes open, as many as one client may" in (
                refused.observation.error
            )
            assert not (await other.reset(seed=3)).done
            # A reset ends the session's own episode first, so a client at its limit can
            # still move on to the next question.
            assert not (await second.reset(seed=4)).done
            assert (await first.query("SELECT 1")).observation.ok
            assert httpx.get(f"{url}/stats").json()["active"] == 3


async def test_a_reset_may_reuse_its_own_episode_id(spider_server):
    async with SQLEnvClient(base_url=spider_server) as env:
        await env.reset(episode_id="mine", question_id=f"{SPIDER_SPLIT}:1")
        await env.describe("singer")
        again = await env.reset(episode_id="mine", question_id=f"{SPIDER_SPLIT}:2")
        assert (again.observation.episode_id, again.done) == ("mine", False)
        assert (await env.state()).step_count == 0


async def test_an_episode_id_another_session_chose_is_neither_refused_nor_shared(spider_server):
    """A chosen episode id is the session's own: "already in use" told anyone which ids other
    clients had chosen, and so that their episodes existed."""
    async with (
        SQLEnvClient(base_url=spider_server) as env,
        SQLEnvClient(base_url=spider_server) as other,
    ):
        await other.reset(episode_id="held by another session", question_id=f"{SPIDER_SPLIT}:1")
        await other.describe("singer")
        mine = await env.reset(
            episode_id="held by another session", question_id=f"{SPIDER_SPLIT}:2"
        )
        assert (mine.observation.episode_id, mine.done) == ("held by another session", False)
        assert (await env.state()).step_count == 0
        assert (await other.state()).step_count == 1
