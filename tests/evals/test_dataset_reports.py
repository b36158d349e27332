"""sqlenv eval groups a run by the dataset's own difficulty labels (BIRD's, on a fixture this
project writes)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_an_eval_on_bird_groups_by_birds_difficulty(tmp_path, cache_dir):
    data = tmp_path / "bird"
    script = ROOT / "scripts" / "dataset_fixtures.py"
    subprocess.run([sys.executable, str(script), "bird", str(data)], check=True, timeout=60)
    command = [sys.executable, "-m", "env_core.cli", "eval", "--policy", "oracle"]
    command += ["--data-dir", str(data), "--out", str(tmp_path / "run"), "--no-progress"]
    command += ["--cache-dir", str(cache_dir)]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=300).stdout
    rows = [line.split() for line in out.splitlines()]
    assert rows[1][:7] == ["oracle", "(inprocess)", "all", "4", "100.0%", "[51.0,", "100.0]"]
    levels = [row[:2] for row in rows[2:5]]
    assert levels == [["simple", "2"], ["moderate", "1"], ["challenging", "1"]]
    episodes = (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()
    assert {json.loads(line)["dataset"] for line in episodes} == {"bird"}
