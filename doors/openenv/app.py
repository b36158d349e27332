"""The ASGI app built from the `SQLENV_*` variables: `uvicorn doors.openenv.app:app`."""

from doors.openenv.server import build_app
from env_core.settings import Settings
from serving.garbage_collection import tune_for_serving

app = build_app(Settings.from_environment())
tune_for_serving()
