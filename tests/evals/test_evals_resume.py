"""`sqlenv eval` killed midway and restarted ends with exactly N episodes, none duplicated,
and with the episodes an uninterrupted run plays; parallel workers change nothing. A record
that was changed or cannot be read is reported, never replayed or counted."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evals import RandomPolicy, evaluate, open_door
from evals.run_folder import RunFolder

EPISODES = 300
SEED = 3
SQLENV = str(Path(sys.executable).parent / "sqlenv")


def eval_command(spec, out: Path, *extra: str, episodes: int = EPISODES) -> list[str]:
    return [
        SQLENV,
        "eval",
        "--policy",
        "random",
        *spec.settings.arguments(),
        "--episodes",
        str(episodes),
        "--seed",
        str(SEED),
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]


def finished_lines(path: Path) -> int:
    return path.read_text().count("\n") if path.is_file() else 0


def kill_after(command: list[str], episodes_file: Path, at_least: int) -> int:
    """Run `command` and SIGKILL its whole process group once `at_least` episodes are in."""
    process = subprocess.Popen(
        command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 180
    while finished_lines(episodes_file) < at_least:
        if process.poll() is not None:
            pytest.fail(f"the run ended before it could be killed: {process.stderr.read()}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail("no episodes were written within 180 s")
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    process.stderr.close()
    return finished_lines(episodes_file)


@pytest.fixture(scope="module")
def uninterrupted(dev_door_spec):
    door = open_door(dev_door_spec)
    try:
        return evaluate(door, RandomPolicy(), EPISODES, SEED)
    finally:
        door.close()


def test_a_killed_parallel_run_resumes_to_exactly_the_uninterrupted_episodes(
    dev_door_spec, uninterrupted, tmp_path
):
    out = tmp_path / "run"
    episodes_file = out / "episodes.jsonl"
    at_kill = kill_after(
        eval_command(dev_door_spec, out, "--door", "mcp-stdio", "--workers", "2"), episodes_file, 20
    )
    assert 20 <= at_kill < EPISODES
    with episodes_file.open("a") as torn:  # as if killed in the middle of a write
        torn.write('{"index": 7, "question_id": "dev_with')

    finished = subprocess.run(
        eval_command(dev_door_spec, out, "--door", "inprocess"), capture_output=True, text=True
    )
    assert finished.returncode == 0, finished.stderr

    lines = episodes_file.read_text().splitlines()
    indices = [json.loads(line)["index"] for line in lines]
    assert sorted(indices) == list(range(EPISODES))
    records = [record for _, record in sorted(RunFolder(out).read_episodes().items())]
    assert records == uninterrupted.records
    summary = json.loads((out / "summary.json").read_text())
    assert summary == uninterrupted.summary.to_dict()
    assert f"random (inprocess)  all       {EPISODES}" in finished.stdout


def test_a_folder_holding_another_run_is_refused(dev_door_spec, tmp_path):
    out = tmp_path / "run"
    first = subprocess.run(
        eval_command(dev_door_spec, out, episodes=5), capture_output=True, text=True
    )
    assert first.returncode == 0, first.stderr
    other_seed = eval_command(dev_door_spec, out, "--seed", "4", episodes=5)
    refused = subprocess.run(other_seed, capture_output=True, text=True)
    assert refused.returncode == 2
    assert "holds a different run (seed 3 there, 4 here)" in refused.stderr


def test_the_same_data_named_by_another_path_resumes(dev_door_spec, tmp_path):
    out = tmp_path / "run"
    first = subprocess.run(
        eval_command(dev_door_spec, out, episodes=3), capture_output=True, text=True
    )
    assert first.returncode == 0, first.stderr
    link = tmp_path / "spider"
    link.symlink_to(Path(dev_door_spec.settings.data_dir).resolve())
    again = eval_command(dev_door_spec, out, "--data-dir", str(link), episodes=5)
    resumed = subprocess.run(again, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(RunFolder(out).read_episodes()) == list(range(5))


@pytest.fixture
def finished_run(dev_door_spec, tmp_path) -> Path:
    out = tmp_path / "run"
    first = subprocess.run(
        eval_command(dev_door_spec, out, episodes=5), capture_output=True, text=True
    )
    assert first.returncode == 0, first.stderr
    return out


def refused_on_reading(dev_door_spec, out: Path) -> list[str]:
    """Resume and compare `out`, which must both be refused with one line; their lines."""
    before = (out / "episodes.jsonl").read_bytes()
    lines = []
    for command in (
        eval_command(dev_door_spec, out, episodes=5),
        [SQLENV, "eval-compare", str(out), "--out", str(out.parent / "compared")],
    ):
        refused = subprocess.run(command, capture_output=True, text=True)
        assert refused.returncode == 2, refused.stderr
        lines += refused.stderr.splitlines()
    assert (out / "episodes.jsonl").read_bytes() == before
    assert not (out.parent / "compared").exists()
    return lines


def test_a_record_edited_to_correct_is_reported_not_counted(dev_door_spec, finished_run):
    episodes_file = finished_run / "episodes.jsonl"
    records = [json.loads(line) for line in episodes_file.read_text().splitlines()]
    wrong = next(number for number, record in enumerate(records, 1) if not record["correct"])
    records[wrong - 1]["correct"] = True
    episodes_file.write_text("".join(json.dumps(record) + "\n" for record in records))

    says = f"{episodes_file}:{wrong} does not match its integrity check"
    assert [line.split(": ", 1)[1] for line in refused_on_reading(dev_door_spec, finished_run)] == [
        f"{says}: the record was changed after the run wrote it (or by another run)"
    ] * 2


def test_a_corrupt_line_is_reported_with_its_file_and_line(dev_door_spec, finished_run):
    episodes_file = finished_run / "episodes.jsonl"
    lines = episodes_file.read_text().splitlines(keepends=True)
    lines[2] = '{"index": 2, "correct": tr\n'
    episodes_file.write_text("".join(lines))

    for line in refused_on_reading(dev_door_spec, finished_run):
        assert f"{episodes_file}:3 is not a JSON record" in line
