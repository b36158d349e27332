"""The Inspect AI door: `sqlenv_task`, an Inspect `Task` over the engine's questions."""

from doors.inspect_task.task import sqlenv_task

__all__ = ["sqlenv_task"]
