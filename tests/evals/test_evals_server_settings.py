"""`sqlenv eval` refuses, in one line, what it cannot evaluate faithfully: a running server whose
episodes have another step budget or reward profile than the run records, and a question file
it cannot read."""

from __future__ import annotations

import json
import sys

import pytest

from env_core.cli import main as sqlenv
from serving.local_server import LocalServer

SERVERS = {
    "openenv": (["doors.commands"], "/health"),
    "mcp-http": (["sqlenv_mcp", "--transport", "http"], "/health"),
}


def evaluate_at(door: str, url: str, out, *flags: str) -> int:
    where = ["--door", door, "--url", url, "--episodes", "1", "--no-progress"]
    return sqlenv(["eval", "--policy", "oracle", *where, "--out", str(out), *flags])


@pytest.mark.parametrize("door", SERVERS)
def test_a_server_running_other_episodes_than_the_run_records_is_refused(
    door, cache_dir, tmp_path, capsys
):
    module, health = SERVERS[door]
    # A server on the embedded demo, with 15 steps and shaped rewards.
    server = LocalServer([sys.executable, "-m", *module], health)
    url = server.url
    try:
        for flags, ours in [
            (["--max-steps", "3"], "not the 3 steps with 'shaped' rewards"),
            (["--reward-profile", "sparse"], "not the 15 steps with 'sparse' rewards"),
        ]:
            assert evaluate_at(door, url, tmp_path / "refused", *flags) == 2
            error = capsys.readouterr().err
            assert error.count("\n") == 1, error
            assert f"the server at {url} runs episodes of 15 steps with 'shaped'" in error
            assert ours in error
        assert not (tmp_path / "refused" / "run.json").exists()
        assert evaluate_at(door, url, tmp_path / "run") == 0
    finally:
        server.stop()
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())
    assert (recorded["max_steps"], recorded["reward_profile"]) == (15, "shaped")


def test_a_question_file_nested_too_deep_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "database").mkdir()
    (tmp_path / "dev.json").write_text("[" * 100_000 + "]" * 100_000)
    run = ["--policy", "oracle", "--data-dir", str(tmp_path), "--out", str(tmp_path / "run")]
    assert sqlenv(["eval", *run, "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"sqlenv eval: cannot read question file {tmp_path / 'dev.json'}: ")
    assert error.count("\n") == 1, error
