"""Door clients: the ways `evaluate` reaches the environment through a door, all giving the
engine's own result types.

Every door client starts an episode on a named question and makes tool calls on it; the
harness keeps its own `Catalog` of the same data (for the question list, hardness and the
oracle), so a door client only has to move calls and results.
"""

from __future__ import annotations

from evals.door_clients.in_process import InProcessClient
from evals.door_clients.spec import DOOR_KINDS, DoorClient, DoorSpec

__all__ = ["DOOR_KINDS", "DoorClient", "DoorSpec", "InProcessClient", "open_door"]


def open_door(spec: DoorSpec) -> DoorClient:
    """A client of the door a spec names; the MCP and OpenEnv clients are imported only when
    used."""
    if spec.kind == "inprocess":
        return InProcessClient(spec)
    if spec.kind in ("mcp-stdio", "mcp-http"):
        from evals.door_clients.mcp_door import MCPDoorClient

        return MCPDoorClient(spec)
    from evals.door_clients.openenv_door import OpenEnvDoorClient

    return OpenEnvDoorClient(spec)
