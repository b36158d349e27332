"""Doors onto the engine for other frameworks: OpenEnv and TRL."""
