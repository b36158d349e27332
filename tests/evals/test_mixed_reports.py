"""sqlenv eval on several datasets at once: Spider-DK (the real release) and the BIRD fixture
this project writes, grouped by dataset and each dataset's labels, through the engine and
through the OpenEnv server."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sqlenv_eval(*args: str, data_dir: str, out: Path, cache_dir: Path) -> list[list[str]]:
    command = [sys.executable, "-m", "env_core.cli", "eval", *args, "--no-progress"]
    command += ["--data-dir", data_dir, "--out", str(out), "--cache-dir", str(cache_dir)]
    command += ["--databases-dir", str(shared_data("spider") / "database")]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
    return [line.split("  ") for line in done.stdout.splitlines()]


def shared_data(name: str) -> Path:
    path = (ROOT / ".." / "shared" / "data" / name).resolve()
    assert path.is_dir(), f"{name} data directory not found at {path}; the tests need it there"
    return path


def mixed_location(tmp_path: Path) -> str:
    """Spider-DK (the real release) and the BIRD fixture, as one data location."""
    bird = tmp_path / "bird"
    script = ROOT / "scripts" / "dataset_fixtures.py"
    subprocess.run([sys.executable, str(script), "bird", str(bird)], check=True, timeout=60)
    return os.pathsep.join([f"{shared_data('spider-dk')}@Spider-DK", str(bird)])


def cells(row: list[str]) -> list[str]:
    return [cell.strip() for cell in row if cell.strip()]


def test_a_mixed_eval_groups_by_dataset_then_by_its_own_labels(tmp_path, cache_dir):
    location = mixed_location(tmp_path)
    for policy, success in (("oracle", "100.0%"), ("random", None)):
        rows = sqlenv_eval(
            *("--policy", policy, "--episodes", "all"),
            data_dir=location,
            out=tmp_path / policy,
            cache_dir=cache_dir,
        )
        header = cells(rows[0])
        assert header[:4] == ["run", "dataset", "hardness", "episodes"]
        assert header[5] == "BIRD EX [95% CI]"  # BIRD's official metric, beside the verdict
        success_from_end = header.index("success [95% CI]") - len(header)
        table = [cells(row) for row in rows[1:-1]]
        assert table[0][1:4] == ["all", "all", "422"]
        datasets = [row[0] for row in table[1:] if row[1] == "all"]
        assert datasets == ["bird", "spider-dk"]
        bird_labels = [row[0] for row in table[2:5]]
        assert table[1][:3] == ["bird", "all", "4"] and bird_labels == [
            "simple",
            "moderate",
            "challenging",
        ]
        assert table[5][:3] == ["spider-dk", "all", "418"]
        assert [row[0] for row in table[6:]][:3] == ["type 0", "type 1", "type 2"]
        if success:
            assert all(row[success_from_end].startswith(success) for row in table[1:]), table
        report = (tmp_path / policy / "report.md").read_text()
        assert "| run | dataset | hardness |" in report
        summary = json.loads((tmp_path / policy / "summary.json").read_text())
        assert set(summary["by_dataset"]) == {"bird", "spider-dk"}


def test_a_prefixed_question_id_passes_through_the_openenv_server(tmp_path, cache_dir):
    sqlenv_eval(
        *("--policy", "oracle", "--door", "openenv", "--episodes", "30", "--seed", "3"),
        data_dir=mixed_location(tmp_path),
        out=tmp_path / "run",
        cache_dir=cache_dir,
    )
    lines = (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()
    episodes = [json.loads(line) for line in lines]
    assert len(episodes) == 30
    ids = {e["question_id"].partition(":")[0] for e in episodes}
    assert ids <= {"spider-dk/Spider-DK", "bird/dev"} and "spider-dk/Spider-DK" in ids
    assert all(e["correct"] and e["dataset"] in e["question_id"] for e in episodes)
