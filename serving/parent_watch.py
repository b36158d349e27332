"""A server started by another program for its own use ends when that program does.

The program (e.g. `serving.local_server.LocalServer`, which `sqlenv eval` uses) sets
`SQLENV_PARENT_PID` to its own process id; the server then stops itself with SIGTERM once its
parent has changed, as it does when the program is killed, instead of running on as an orphan.
"""

from __future__ import annotations

import os
import signal
import threading
import time

PARENT_VARIABLE = "SQLENV_PARENT_PID"
CHECK_INTERVAL_S = 0.5


def stop_with_parent() -> None:
    """Start watching the parent named by $SQLENV_PARENT_PID (nothing when it is unset)."""
    parent = os.environ.get(PARENT_VARIABLE, "")
    if not parent.isdigit():
        return

    def watch() -> None:
        while os.getppid() == int(parent):
            time.sleep(CHECK_INTERVAL_S)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
