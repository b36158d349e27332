"""The SkyRL door: `import doors.skyrl` registers `env_class: sqlenv` with skyrl-gym."""

from doors.skyrl.environment import ENV_ID, SQLEnvSkyRL, register

register()

__all__ = ["ENV_ID", "SQLEnvSkyRL", "register"]
