"""The OpenEnv door: an OpenEnv environment server, typed client and web UI over the engine.

Everything that imports `openenv` (and so gradio) lives under this package, never in `env_core`.
The package needs the `openenv` extra; without it, importing it is one clear error.
"""

from env_core.extras import require_extra

require_extra("openenv", "the OpenEnv door", __name__)
