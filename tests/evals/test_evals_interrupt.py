"""`sqlenv eval` stopped with Ctrl-C, which a terminal sends to the whole process group, exits
with 130 saying how far it got and that the same command resumes, and nothing else, even while
its worker processes start."""

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evals import RandomPolicy, evaluate, open_door
from evals.evaluate import RunInterrupted
from evals.run_folder import RunFolder

SQLENV = str(Path(sys.executable).parent / "sqlenv")
INTERRUPTED = 130
RESUME = re.compile(
    r"sqlenv eval: interrupted after (\d+) of (\d+) episodes; run the same command to resume\n"
)
# A worker whose interpreter is up is this long into importing what it runs (about 1 s here).
IMPORTING_S = 0.2


def started_workers(pid: int) -> list[str]:
    """The worker processes `pid` has started (multiprocessing's, not its SQL sandbox's)."""
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += (task / "children").read_text().split()
    return [child for child in children if b"multiprocessing" in _read(child, "cmdline")]


def catches_ctrl_c(pid: str) -> bool:
    """Whether a process has a handler for SIGINT: a Python interpreter has one once it is up."""
    for line in _read(pid, "status").decode().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & 1 << (signal.SIGINT - 1))
    return False


def _read(pid: str, name: str) -> bytes:
    with contextlib.suppress(FileNotFoundError):  # it has ended meanwhile
        return Path(f"/proc/{pid}/{name}").read_bytes()
    return b""


def test_ctrl_c_while_the_workers_start_is_130_and_says_the_run_resumes(dev_door_spec, tmp_path):
    command = [SQLENV, "eval", "--policy", "random", *dev_door_spec.settings.arguments()]
    command += ["--workers", "2", "--out", str(tmp_path / "run"), "--no-progress"]
    process = subprocess.Popen(
        command, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not any(map(catches_ctrl_c, started_workers(process.pid))):
            assert process.poll() is None and time.monotonic() < deadline, "no worker started"
            time.sleep(0.005)
        time.sleep(IMPORTING_S)
        os.killpg(process.pid, signal.SIGINT)  # as Ctrl-C in a terminal
        out, err = process.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever is left of the group
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert (process.returncode, out) == (INTERRUPTED, "")
    said = RESUME.fullmatch(err)
    assert said and said.group(1) == "0", err


def test_ctrl_c_midway_says_how_far_the_run_got_and_the_same_command_resumes(
    dev_door_spec, tmp_path
):
    out = tmp_path / "run"
    command = [SQLENV, "eval", "--policy", "random", *dev_door_spec.settings.arguments()]
    command += ["--episodes", "300", "--out", str(out), "--no-progress"]
    process = subprocess.Popen(
        command, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    episodes_file = out / "episodes.jsonl"
    try:
        deadline = time.monotonic() + 120
        while not episodes_file.is_file() or episodes_file.read_text().count("\n") < 10:
            assert process.poll() is None and time.monotonic() < deadline, "no episodes played"
            time.sleep(0.01)
        os.killpg(process.pid, signal.SIGINT)
        out_text, err = process.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert (process.returncode, out_text) == (INTERRUPTED, "")
    said = RESUME.fullmatch(err)
    assert said, err
    assert int(said.group(1)) == episodes_file.read_text().count("\n") >= 10
    assert said.group(2) == "300"
    resumed = subprocess.run(command, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert episodes_file.read_text().count("\n") == 300


def test_ctrl_c_while_an_episode_is_written_counts_only_the_episodes_the_folder_holds(
    dev_door_spec, tmp_path, monkeypatch
):
    """The count said is the one a resume skips, wherever Ctrl-C lands: here as the fourth
    finished episode is about to reach the file."""
    written = RunFolder.append
    calls = []

    def interrupted_on_the_fourth(folder, record):
        calls.append(record.index)
        if len(calls) == 4:
            raise KeyboardInterrupt
        written(folder, record)

    monkeypatch.setattr(RunFolder, "append", interrupted_on_the_fourth)
    door = open_door(dev_door_spec)
    try:
        with pytest.raises(RunInterrupted) as said:
            evaluate(door, RandomPolicy(), 10, out_dir=tmp_path / "run")
    finally:
        door.close()
    assert str(said.value).startswith("interrupted after 3 of 10 episodes;")
    assert len(RunFolder(tmp_path / "run").read_episodes()) == 3


# An MCP server that never answers `initialize`, and a Ctrl-C while the door waits for it.
SILENT_SERVER_CONNECTION = """
import os, signal, sys, threading
from mcp.client.stdio import StdioServerParameters, stdio_client
from evals.door_clients.mcp_door import MCPSession

silent = StdioServerParameters(command=sys.executable, args=["-c", "import time; time.sleep(60)"])
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    MCPSession(lambda: stdio_client(silent), "over stdio")
except KeyboardInterrupt:
    print("interrupted")
"""


def test_ctrl_c_while_the_mcp_door_connects_ends_the_connection():
    finished = subprocess.run(
        [sys.executable, "-c", SILENT_SERVER_CONNECTION], capture_output=True, text=True, timeout=30
    )
    assert (finished.returncode, finished.stdout) == (0, "interrupted\n"), finished.stderr
