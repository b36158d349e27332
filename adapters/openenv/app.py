"""The ASGI app built from environment variables: `uvicorn adapters.openenv.app:app`."""

from adapters.openenv.server import ServerSettings, build_app

app = build_app(ServerSettings.from_environment())
