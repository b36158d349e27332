"""Doors: the ways `evaluate` reaches the environment, all giving the engine's own result types.

Every door starts an episode on a named question and makes tool calls on it; the harness keeps
its own `Catalog` of the same data (for the question list, hardness and the oracle), so a door
only has to move calls and results.
"""

from __future__ import annotations

from evals.door_clients.in_process import InProcessDoor
from evals.door_clients.spec import DOOR_KINDS, Door, DoorSpec

__all__ = ["DOOR_KINDS", "Door", "DoorSpec", "InProcessDoor", "open_door"]


def open_door(spec: DoorSpec) -> Door:
    """Open the door a spec names; the MCP and OpenEnv clients are imported only when used."""
    if spec.kind == "inprocess":
        return InProcessDoor(spec)
    if spec.kind in ("mcp-stdio", "mcp-http"):
        from evals.door_clients.mcp_door import MCPDoor

        return MCPDoor(spec)
    from evals.door_clients.openenv_door import OpenEnvDoor

    return OpenEnvDoor(spec)
