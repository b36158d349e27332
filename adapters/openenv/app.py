"""The ASGI app built from the `SQLENV_*` variables: `uvicorn adapters.openenv.app:app`."""

from adapters.openenv.server import build_app
from env_core.garbage_collection import tune_for_serving
from env_core.settings import Settings

app = build_app(Settings.from_environment())
tune_for_serving()
