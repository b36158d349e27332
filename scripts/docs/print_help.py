"""Print what `COMMAND --help` prints for each command given, as one JSON object
{command: help}, from this one process: each runs as its console script or `python -m` would
run it, and the libraries they import (torch among them) are imported once, not per command.

    python scripts/docs/print_help.py "sqlenv eval" "python -m training.sft"
"""

from __future__ import annotations

import importlib
import io
import json
import sys
from contextlib import redirect_stdout
from importlib.metadata import entry_points


def help_text(command: str) -> str:
    words = command.split()
    output = io.StringIO()
    with redirect_stdout(output):
        try:
            if words[:2] == ["python", "-m"]:
                # What the module's `__main__` guard runs.
                sys.argv = [words[2], "--help"]
                importlib.import_module(words[2]).main()
            else:
                sys.argv = [*words, "--help"]
                next(iter(entry_points(group="console_scripts", name=words[0]))).load()()
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                raise
    return output.getvalue()


if __name__ == "__main__":
    print(json.dumps({command: help_text(command) for command in sys.argv[1:]}))
