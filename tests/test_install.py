"""The package as users install it: the wheel built from the tracked files, installed with no
extra into a fresh virtual environment, and run by `uvx` as MCP hosts run servers. The MCP
server then plays an episode over stdio on the embedded demo; a door that needs an extra says
which, in one line.

Needs PyPI (the wheel's dependencies and `uv`), as the install itself does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from env_core.answers import gold_as_json

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[1]
QUESTION = "dev:15"
INSTALL_TIMEOUT_S = 900


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def run(*command: str | Path, **options) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        **options,
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of the files git sees, built outside the checkout."""
    source = tmp_path_factory.mktemp("source")
    listed = ["git", "ls-files", "--cached", "--others", "--exclude-standard"]
    tracked = run(*listed, cwd=ROOT, check=True).stdout.splitlines()
    for name in tracked:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, source)
    assert built.returncode == 0, built.stderr
    return next(out.glob("sqlenv_mcp-*.whl"))


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment holding the wheel and nothing else; its bin folder."""
    venv = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", venv, check=True)
    result = run(venv / "bin" / "pip", "install", "-q", wheel)
    assert result.returncode == 0, result.stderr
    return venv / "bin"


def user_environment(cache_dir: Path, bin_dir: Path) -> dict[str, str]:
    """PATH and the cache, as a host starts a server; no SQLENV_DATA_DIR: the demo."""
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SQLENV_CACHE_DIR": str(cache_dir)}


async def play_one_episode(params: StdioServerParameters, demo_catalog) -> str:
    question = demo_catalog.question(QUESTION)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        started = await session.call_tool("start_episode", {"question_id": question.id})
        assert started.content[0].text.startswith(f"Question: {question.text}")
        await session.call_tool("query", {"sql": question.sql})
        answered = await session.call_tool("answer", {"value": gold_as_json(question.gold)})
        return answered.content[0].text


async def test_the_installed_mcp_server_plays_an_episode_over_stdio(
    installed, demo_catalog, cache_dir
):
    assert run(installed / "sqlenv-mcp", "--version").stdout.startswith("sqlenv-mcp ")
    params = StdioServerParameters(
        command=str(installed / "sqlenv-mcp"), env=user_environment(cache_dir, installed)
    )
    assert await play_one_episode(params, demo_catalog) == "Correct. The episode is over."


async def test_uvx_runs_the_mcp_server_from_the_wheel(wheel, installed, demo_catalog, cache_dir):
    assert run(installed / "pip", "install", "-q", "uv").returncode == 0
    # uv downloads the wheel's dependencies: it needs the machine's network settings too.
    network = {name: value for name, value in os.environ.items() if not name.startswith("SQLENV_")}
    environment = {
        **network,
        **user_environment(cache_dir, installed),
        "UV_CACHE_DIR": str(cache_dir / "uv"),
    }
    params = StdioServerParameters(
        command=str(installed / "uvx"), args=["--from", str(wheel), "sqlenv-mcp"], env=environment
    )
    assert await play_one_episode(params, demo_catalog) == "Correct. The episode is over."


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        (["sqlenv-openenv"], "openenv"),
        (["sqlenv", "eval", "--policy", "oracle", "--out", "run"], "eval"),
        (["python", "-m", "training.sft", "--tiny"], "train"),
    ],
)
def test_a_door_without_its_extra_names_it_in_one_line(installed, wheel, command, extra, tmp_path):
    result = run(installed / command[0], *command[1:], cwd=tmp_path, stdin=subprocess.DEVNULL)
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1, result.stderr
    assert f"needs the '{extra}' extra" in lines[0]
    assert f"install 'sqlenv-mcp[{extra}] @ {wheel.as_uri()}'" in lines[0]


@pytest.fixture
def installed_alone(wheel, tmp_path) -> Path:
    """Another environment with the wheel alone, for a test that adds an extra to it."""
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, check=True)
    assert run(venv / "bin" / "pip", "install", "-q", wheel).returncode == 0
    return venv / "bin"


def test_the_install_command_a_missing_extra_names_installs_it(installed_alone, tmp_path):
    """The hint is a command that works for the way the package was installed (here from a
    wheel file, whose name is on no package index): run as printed, the door then works."""
    evaluate = [installed_alone / "sqlenv", "eval", "--policy", "oracle", "--episodes", "2"]
    refused = run(*evaluate, "--out", tmp_path / "run", stdin=subprocess.DEVNULL)
    hint = refused.stderr.strip().rsplit("): ", 1)[1]
    assert hint.startswith(str(installed_alone / "python")) and " -m pip install " in hint, hint
    added = run("sh", "-c", hint)
    assert added.returncode == 0, added.stderr
    evaluated = run(*evaluate, "--no-progress", "--out", tmp_path / "run")
    assert evaluated.returncode == 0, evaluated.stderr
    assert "oracle" in evaluated.stdout
