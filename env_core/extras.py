"""The optional parts of the package: what each needs, and a clear error when it is missing.

`pip install sqlenv-mcp` gives the engine, the `sqlenv` command and the MCP server. The OpenEnv
server, training and the evaluation reports need an extra each, named in the error a missing
one produces.
"""

from __future__ import annotations

import importlib.util

from env_core.command_line import PACKAGE

EXTRAS = {
    "openenv": ("openenv", "fastapi", "uvicorn", "gradio"),
    "train": ("torch", "transformers", "trl", "datasets"),
    "eval": ("matplotlib", "tqdm"),
    "green": ("a2a", "matplotlib", "tqdm"),
}


class MissingExtraError(ImportError):
    """An optional part of the package that is not installed."""


def require_extra(extra: str, needed_by: str, package: str | None = None) -> None:
    """Raise `MissingExtraError` unless every module of the extra can be imported. `package`
    names the package whose import needs it: `python -m package.module` then reports the error
    in one line instead of a traceback."""
    missing = [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError(
            f"{needed_by} needs the '{extra}' extra, which is not installed (no "
            f"{', '.join(missing)}): pip install '{PACKAGE}[{extra}]'",
            name=package,
        )
