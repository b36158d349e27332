"""`openenv validate`, static on the repository and at runtime on a live server; hadolint."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from openenv_testing import require_executable

REPOSITORY = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def repository_files(target: Path) -> Path:
    """The files git sees (tracked, or new and not ignored), copied to `target`.

    The validator refuses trees holding symbolic links, and node_modules/ (the MCP Inspector,
    ignored by git) is full of them.
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPOSITORY,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPOSITORY / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target / name)
    return target


def openenv_validate(*arguments: str) -> dict:
    command = [require_executable(str(BIN / "openenv")), "validate", *arguments, "--json"]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    return json.loads(finished.stdout)


def test_static_validation_passes_on_the_repository(tmp_path):
    report = openenv_validate("--level", "static", str(repository_files(tmp_path)))
    assert report["verdict"] == "pass", report["results"]
    assert report["manifest"]["capabilities"]["declared_tools"] == [
        "describe",
        "sample",
        "query",
        "answer",
    ]


def test_runtime_validation_passes_on_a_live_server(spider_server):
    report = openenv_validate("--url", spider_server)
    assert report["passed"], report["criteria"]
    assert {criterion["id"] for criterion in report["criteria"]} >= {
        "health_endpoint",
        "metadata_endpoint",
        "schema_endpoint",
        "mcp_endpoint",
    }


def test_dockerfile_is_lint_clean():
    hadolint = require_executable(str(BIN / "hadolint"))
    finished = subprocess.run(
        [hadolint, str(REPOSITORY / "Dockerfile")], capture_output=True, text=True
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
