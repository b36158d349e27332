"""The OpenEnv door: an OpenEnv environment server, typed client and web UI over the engine.

Everything that imports `openenv` (and so gradio) lives under this package, never in `env_core`.
"""
