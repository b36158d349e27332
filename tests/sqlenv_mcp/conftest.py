import pytest
from mcp_processes import RunningServer

DEV = "dev_without_wta_1"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def manager(spider_catalog):
    from env_core.manager import EpisodeManager
    from env_core.settings import Settings

    manager = EpisodeManager(spider_catalog, Settings(split=DEV, max_episodes=32))
    yield manager
    manager.shutdown()


@pytest.fixture
def http_server(spider_dir, cache_dir):
    servers: list[RunningServer] = []

    def start(*args: str, port: int = 0) -> RunningServer:
        # Explorer mode (--db) serves the user's files and refuses --data-dir.
        data = [] if "--db" in args else ["--data-dir", str(spider_dir), "--split", DEV]
        server = RunningServer([*data, *args], cache_dir, port)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
