"""One episode through the typed OpenEnv client, against `sqlenv-openenv` on the demo data.

sqlenv-openenv &                                  # http://127.0.0.1:8000
python docs/examples/typed_client.py http://127.0.0.1:8000
"""

import asyncio
import sys

from doors.openenv.client import SQLAction, SQLEnvClient


async def play(url: str) -> None:
    async with SQLEnvClient(base_url=url) as env:
        start = await env.reset(question_id="dev:15")  # or seed=..., db_id=..., split=...
        print(start.observation.text)  # question, database, tables, budget
        result = await env.describe("books")
        print(result.observation.data["row_count"], result.reward)
        result = await env.query(
            "SELECT genre, count(*) FROM books GROUP BY genre ORDER BY count(*) DESC LIMIT 1"
        )
        print(result.observation.text)
        print(result.observation.data["rows"], result.reward)
        result = await env.answer("Fiction")
        print(result.observation.text, result.reward, result.done)
        state = await env.state()
        print(state.step_count, state.budget_left, state.db_id)


def play_sync(url: str) -> None:
    with SQLEnvClient(base_url=url).sync() as env:
        env.reset(question_id="dev:15")
        result = env.step(SQLAction(action_type="QUERY", argument="SELECT count(*) FROM books"))
        print(result.observation.text)


if __name__ == "__main__":
    asyncio.run(play(sys.argv[1]))
    play_sync(sys.argv[1])
