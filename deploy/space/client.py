"""The environment's typed client, where OpenEnv's layout puts it (`openenv push` looks for
this file): `SQLEnvClient` over the WebSocket, from `doors.openenv.client`."""

from doors.openenv.client import SQLAction, SQLEnvClient, SQLObservation

__all__ = ["SQLAction", "SQLEnvClient", "SQLObservation"]
