"""docs/getting-started.md walked as a newcomer does, from a fresh clone of this repository:
`make setup`, `sqlenv play`, then `make run`'s server played by hand with the MCP Inspector as
docs/mcp.md shows. Only committed work is cloned."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from mcp_inspector import call_tool, http, require_inspector, run

from serving.local_server import LocalServer

REPO = Path(__file__).resolve().parents[2]


def test_getting_started_from_a_fresh_clone(tmp_path):
    inspector = require_inspector()
    clone = tmp_path / "sqlenv-mcp"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120)
    # As a user's shell runs it: not inside `make test`, whose MAKEFLAGS and MAKELEVEL would
    # make the inner make print the directories it enters and leaves.
    ours = ("SQLENV_", "VIRTUAL_ENV", "MAKEFLAGS", "MAKELEVEL", "MFLAGS")
    kept = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
    environment = {**kept, "SQLENV_CACHE_DIR": str(tmp_path / "cache")}

    def shell(*command: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            command, cwd=clone, env=environment, capture_output=True, text=True, timeout=600
        )

    setup = shell("make", "setup")
    assert setup.returncode == 0, setup.stderr
    assert "take precedence during imports" not in setup.stderr  # setuptools' boxed warning

    played = shell(str(clone / ".venv" / "bin" / "sqlenv"), "play")
    assert played.returncode == 0, played.stderr
    assert played.stdout.rstrip().endswith("correct"), played.stdout

    # `make run`'s command, on a free port rather than 8000.
    recipe = shell("make", "--dry-run", "run").stdout.strip().splitlines()[-1]
    assert recipe == ".venv/bin/sqlenv-mcp --transport http --route-by-episode-id"
    command = [
        str(clone / word) if word.startswith(".venv") else word for word in shlex.split(recipe)
    ]
    previous = dict(os.environ)
    os.environ.clear()
    os.environ.update(environment)
    try:
        server = LocalServer(command, "/health")
    finally:
        os.environ.clear()
        os.environ.update(previous)
    try:
        target = http(server.url)
        started = call_tool(inspector, target, "start_episode", "seed=3")
        assert started["isError"] is False, started["content"][0]["text"]
        episode = f"episode_id={started['structuredContent']['episode_id']}"
        table = started["structuredContent"]["tables"][0]
        described = call_tool(inspector, target, "describe", f"table={table}")
        assert described["isError"] is True  # each Inspector call is a new MCP session
        call = ["--method", "tools/call", "--tool-name", "describe", "--tool-arg", f"table={table}"]
        described = run(inspector, *target, *call, "--tool-arg", episode)
        assert described["isError"] is False, described["content"][0]["text"]
    finally:
        server.stop()
