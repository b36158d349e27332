"""The optional parts of the package: what each needs, and a clear error when it is missing.

`pip install sqlenv-mcp` gives the engine, the `sqlenv` command and the MCP server. The OpenEnv
server, training and the evaluation reports need an extra each, named in the error a missing
one produces with the command that adds it to this installation.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import sys
from importlib.metadata import distributions
from pathlib import Path
from urllib.parse import unquote, urlparse

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
            f"{', '.join(missing)}): {install_command(extra)}",
            name=package,
        )


def install_command(extra: str) -> str:
    """The command that adds `extra` to this installation, from where it was installed: a
    clone's folder, a wheel file or a Git URL (as pip recorded it, PEP 610), else the index."""
    origin = _install_origin()
    editable = origin is not None and origin.get("dir_info", {}).get("editable") is True
    return f"{_pip()} install {'-e ' if editable else ''}{shlex.quote(_requirement(extra, origin))}"


def _pip() -> str:
    """`pip` when the one on PATH installs into this interpreter's environment."""
    on_path = shutil.which("pip")
    if on_path and Path(on_path).parent == Path(sys.executable).parent:
        return "pip"
    return f"{shlex.quote(sys.executable)} -m pip"


def _requirement(extra: str, origin: dict | None) -> str:
    if origin is None:
        return f"{PACKAGE}[{extra}]"
    url = origin["url"]
    if "vcs_info" in origin:
        vcs = origin["vcs_info"]
        return f"{PACKAGE}[{extra}] @ {vcs['vcs']}+{url}@{vcs.get('commit_id', '')}".rstrip("@")
    if url.startswith("file:") and "dir_info" in origin:
        return f"{_shown_path(Path(unquote(urlparse(url).path)))}[{extra}]"
    return f"{PACKAGE}[{extra}] @ {url}"


def _install_origin() -> dict | None:
    """pip's record of where this package came from, or None for the package index. A build's
    own metadata folder (`*.egg-info` in a clone) records nothing: the installed one does."""
    for installed in distributions(name=PACKAGE):
        recorded = installed.read_text("direct_url.json")
        try:
            origin = json.loads(recorded) if recorded else None
        except ValueError:
            continue
        if isinstance(origin, dict) and isinstance(origin.get("url"), str):
            return origin
    return None


def _shown_path(folder: Path) -> str:
    try:
        relative = os.path.relpath(folder)
    except ValueError:
        return str(folder)
    return relative if not relative.startswith("..") else str(folder)
