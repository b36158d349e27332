"""What every command shares: a parser whose mistakes are one line, `--version`, and a main
that turns an error into one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import re
import sys
from collections.abc import Callable
from importlib.metadata import version

from env_core.errors import SQLEnvError

PACKAGE = "sqlenv-mcp"
USAGE_ERROR = 2
INTERRUPTED = 130
INVALID_CHOICE = re.compile(r"invalid choice: '(?P<value>[^']*)' \(choose from (?P<choices>.*)\)")


class CommandError(Exception):
    """A command cannot do what it was asked; `str(error)` says why and what to do."""


class CommandParser(argparse.ArgumentParser):
    """An argument parser that reports a mistake in one line and knows the package version."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--version", action="version", version=f"%(prog)s {version(PACKAGE)}")

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(
            USAGE_ERROR, f"{self.prog}: {message}{_suggestion(message)} (see {self.prog} --help)\n"
        )


class RenamedFlag(argparse.Action):
    """A flag that was renamed: given, it is refused with its new name (`new`), not ignored.
    Hidden from the help."""

    def __init__(self, option_strings: list[str], dest: str, new: str) -> None:
        hidden = {"default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
        super().__init__(option_strings, dest, nargs="?", **hidden)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        parser.error(f"{option_string} is now {self.new}")


def _suggestion(message: str) -> str:
    """ ", did you mean 'eval'?" for a mistyped choice close to one of the choices."""
    mistake = INVALID_CHOICE.search(message)
    if mistake is None:
        return ""
    choices = re.findall(r"'([^']*)'", mistake["choices"])
    close = difflib.get_close_matches(mistake["value"], choices, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def run_main(prog: str, main: Callable[[], int | None]) -> int:
    """Run a command's main: an expected error is one line on stderr and exit status 2 (1 for
    a missing extra or a failing system call), Ctrl-C a quiet 130."""
    try:
        return main() or 0
    except KeyboardInterrupt:
        return INTERRUPTED
    except (SQLEnvError, CommandError, ValueError) as error:
        return _report(prog, error, USAGE_ERROR)
    except (ImportError, OSError) as error:
        return _report(prog, error, 1)


def _report(prog: str, error: BaseException, status: int) -> int:
    logging.getLogger(prog).debug("failed", exc_info=error)
    print(f"{prog}: {error}", file=sys.stderr)
    return status
