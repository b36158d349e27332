"""Every command turns every bad input and every unreachable endpoint into one clear line on
stderr and a non-zero exit, promptly: no traceback, no hang.

Each row runs the real command in a process of its own, as a user's shell does.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from serving.asgi import bound_socket

BIN = Path(sys.executable).parent
TIME_LIMIT_S = 60


@dataclass(frozen=True)
class Case:
    command: list[str]
    says: str
    environment: dict[str, str] = field(default_factory=dict)


def cases(tmp: Path, busy_port: int, dead_url: str) -> dict[str, Case]:
    """`busy_port` is listened on by another socket; nothing listens at `dead_url`."""
    missing = str(tmp / "no-such-dir")
    a_file = tmp / "a-file"
    mcp, openenv, sqlenv = (
        [str(BIN / "sqlenv-mcp")],
        [str(BIN / "sqlenv-openenv")],
        [str(BIN / "sqlenv")],
    )
    python = [sys.executable, "-m"]

    def evaluation(policy: str, run: str) -> list[str]:
        return [*sqlenv, "eval", "--policy", policy, "--episodes", "1", "--out", str(tmp / run)]

    return {
        # sqlenv-mcp
        "mcp port out of range": Case([*mcp, "--port", "99999"], "99999 is out of range"),
        "mcp missing data dir": Case([*mcp, "--data-dir", missing], "no such directory"),
        "mcp unknown split": Case([*mcp, "--split", "nosuch"], "no question file for split"),
        "mcp no steps": Case([*mcp, "--max-steps", "0"], "0 is out of range"),
        "mcp bad log level": Case([*mcp, "--log-level", "loud"], "invalid choice: 'loud'"),
        "mcp bad variable": Case(mcp, "SQLENV_MAX_STEPS: 'x' is not", {"SQLENV_MAX_STEPS": "x"}),
        "mcp renamed flag": Case(
            [*mcp, "--max-connections-per-client", "3"],
            "--max-connections-per-client is now --max-sessions-per-client",
        ),
        "assess renamed flag": Case(
            [*sqlenv, "assess", "--participant", "http://127.0.0.1:9/"],
            "--participant is now --agent",
        ),
        "openenv renamed variable": Case(
            openenv,
            "SQLENV_IDLE_CONNECTION_TIMEOUT is now SQLENV_IDLE_SESSION_TIMEOUT: rename it",
            {"SQLENV_IDLE_CONNECTION_TIMEOUT": "60"},
        ),
        "mcp db and data dir": Case(
            [*mcp, "--db", str(a_file), "--data-dir", missing], "--db serves your own files"
        ),
        "mcp empty db": Case([*mcp, "--db", ""], "argument --db: an empty path names no database"),
        "mcp missing db": Case([*mcp, "--db", missing], "no such file or folder"),
        "mcp port in use": Case(
            [*mcp, "--transport", "http", "--port", str(busy_port)], "address already in use"
        ),
        "mcp assess with db": Case(
            [*mcp, "--assess", "dev:1", "--db", str(a_file)], "--assess serves questions"
        ),
        "mcp assess two over stdio": Case(
            [*mcp, "--assess", "dev:1,dev:2"], "over stdio --assess serves one question"
        ),
        "mcp assess unknown question": Case([*mcp, "--assess", "dev:99999"], "dev:99999"),
        "mcp assess a question twice": Case(
            [*mcp, "--transport", "http", "--assess", "dev:1,dev:1"], "assigned in this assessment"
        ),
        # sqlenv-openenv
        "openenv missing data dir": Case([*openenv, "--data-dir", missing], "no such directory"),
        "openenv unknown split": Case([*openenv, "--split", "nosuch"], "no question file"),
        "openenv no steps": Case([*openenv, "--max-steps", "0"], "0 is out of range"),
        "openenv no episodes": Case([*openenv, "--max-episodes", "0"], "0 is out of range"),
        "openenv bad log level": Case([*openenv, "--log-level", "loud"], "invalid choice"),
        "openenv port in use": Case([*openenv, "--port", str(busy_port)], "address already in use"),
        # sqlenv
        "mistyped command": Case([*sqlenv, "evl"], "invalid choice: 'evl' (choose from"),
        "mistyped command is suggested": Case([*sqlenv, "evl"], "; did you mean 'eval'?"),
        "mistyped choice is suggested": Case(
            [*sqlenv, "eval", "--policy", "orcle", "--out", str(tmp / "o")],
            "; did you mean 'oracle'?",
        ),
        "play no steps": Case([*sqlenv, "play", "--max-steps", "0"], "0 is out of range"),
        "play question and database": Case(
            [*sqlenv, "play", "--question-id", "dev:1", "--db-id", "farm_shop"],
            "not allowed with argument",
        ),
        "play unknown question": Case(
            [*sqlenv, "play", "--question-id", "dev:99999"], "no question 'dev:99999'"
        ),
        "play data dir is a file": Case(
            [*sqlenv, "play", "--data-dir", str(a_file)], "is a file, not a data directory"
        ),
        "prepare missing data dir": Case(
            [*sqlenv, "data", "prepare", "--data-dir", missing], "no such directory"
        ),
        "eval no workers": Case(
            [*evaluation("random", "workers"), "--workers", "0"], "0 is out of range"
        ),
        "eval unreachable mcp": Case(
            [*evaluation("oracle", "mcp"), "--door", "mcp-http", "--url", dead_url],
            f"cannot reach the MCP server at {dead_url}",
        ),
        "eval unreachable openenv": Case(
            [*evaluation("oracle", "openenv"), "--door", "openenv", "--url", dead_url],
            f"cannot reach the OpenEnv server at {dead_url}",
        ),
        "eval unresolvable mcp host": Case(
            [*evaluation("oracle", "host"), "--door", "mcp-http", "--url", "http://nosuch.invalid"],
            "cannot reach the MCP server at http://nosuch.invalid: cannot resolve the host "
            "nosuch.invalid",
        ),
        "eval url without a server door": Case(
            [*evaluation("oracle", "url"), "--url", dead_url],
            "--url goes with --door mcp-http or openenv",
        ),
        "eval unreachable model": Case(
            [*evaluation("openai", "model"), "--model", "m", "--base-url", dead_url],
            f"cannot reach the model endpoint at {dead_url}",
        ),
        "eval hf no model folder": Case(
            [*evaluation("hf", "hf"), "--model", missing], f"--policy hf: no model folder {missing}"
        ),
        "eval out is a file": Case(
            [*sqlenv, "eval", "--policy", "oracle", "--out", str(a_file)],
            "is a file, not a run folder",
        ),
        "eval empty out": Case(
            [*sqlenv, "eval", "--policy", "oracle", "--out", ""],
            "argument --out: an empty path names no folder",
        ),
        "eval-compare empty out": Case(
            [*sqlenv, "eval-compare", str(tmp), "--out", " "],
            "argument --out: an empty path names no folder",
        ),
        "eval-compare no run": Case(
            [*sqlenv, "eval-compare", str(tmp), "--out", str(tmp / "cmp")],
            "is not a run folder: it has no run.json",
        ),
        "audit unknown profile": Case(
            [*sqlenv, "audit-reward", "--profiles", "generous"], "unknown reward profile generous"
        ),
        "settings bad variable": Case(
            [*sqlenv, "settings"],
            "sqlenv settings: SQLENV_MAX_STEPS: 'abc' is not a whole number",
            {"SQLENV_MAX_STEPS": "abc"},
        ),
        "play bad log level": Case(
            [*sqlenv, "play"],
            "sqlenv play: SQLENV_LOG_LEVEL: 'LOUD' is not one of debug, info, warning, error",
            {"SQLENV_LOG_LEVEL": "LOUD"},
        ),
        "play superscript steps": Case(
            [*sqlenv, "play"],
            "sqlenv play: SQLENV_MAX_STEPS: '²' is not a whole number",
            {"SQLENV_MAX_STEPS": "²"},
        ),
        "eval empty split": Case(
            evaluation("oracle", "empty-split"),
            "sqlenv eval: SQLENV_SPLIT: an empty value is not allowed",
            {"SQLENV_SPLIT": ""},
        ),
        "green bad variable": Case(
            [*sqlenv, "green"],
            "sqlenv green: SQLENV_MAX_STEPS: '--5' is not a whole number",
            {"SQLENV_MAX_STEPS": "--5"},
        ),
        "green port in use": Case(
            [*sqlenv, "green", "--port", str(busy_port)], "address already in use"
        ),
        "green unknown split": Case(
            [*sqlenv, "green", "--split", "nosuch"], "no question file for split 'nosuch'"
        ),
        "purple without a policy": Case(
            [*sqlenv, "purple"], "the following arguments are required: --policy"
        ),
        # python -m training.*
        "sft missing config": Case(
            [*python, "training.sft", "--config", str(tmp / "none.toml")],
            "cannot read the configuration",
        ),
        "grpo bad config": Case(
            [*python, "training.grpo", "--config", str(a_file)], "[trainer] needs output_dir"
        ),
    }


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad-inputs")
    (tmp / "a-file").write_text("[model]\ntiny = true\n")
    # Both held for the module: `unheard` is bound and never listens, so connecting to it is
    # refused at once, and no other socket can take its port meanwhile.
    with bound_socket("127.0.0.1", 0) as busy, bound_socket("127.0.0.1", 0) as unheard:
        busy.listen()
        dead_url = f"http://127.0.0.1:{unheard.getsockname()[1]}"
        yield cases(tmp, busy.getsockname()[1], dead_url)


@pytest.mark.parametrize("name", cases(Path("/tmp"), 1, "").keys())
def test_a_bad_input_is_one_clear_line(table, name, cache_dir):
    case = table[name]
    environment = {"PATH": str(BIN), "SQLENV_CACHE_DIR": str(cache_dir), **case.environment}
    result = subprocess.run(
        case.command,
        capture_output=True,
        text=True,
        timeout=TIME_LIMIT_S,
        env=environment,
        stdin=subprocess.DEVNULL,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0, result.stderr
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert case.says in lines[0], lines[0]
    assert result.stdout == ""


def test_the_table_covers_every_command():
    commands = {Path(case.command[0]).name for case in cases(Path("/tmp"), 1, "").values()}
    assert commands >= {"sqlenv-mcp", "sqlenv-openenv", "sqlenv", Path(sys.executable).name}
