import os
import subprocess
import sys
import time


def sqlenv(*args: str, cache_dir, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "env_core.cli", *args, "--cache-dir", str(cache_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=check,
    )


def test_play_prints_a_whole_scripted_episode_on_the_demo(cache_dir):
    out = sqlenv("play", "--seed", "3", cache_dir=cache_dir).stdout
    assert "Question: " in out and "Database: " in out and "Tables: " in out
    assert "> describe(table=" in out and "> query(sql=" in out and "> answer(value=" in out
    assert "Correct. The episode is over." in out
    assert out.rstrip().endswith("correct")


def test_play_same_seed_same_question(cache_dir):
    first = sqlenv("play", "--seed", "11", cache_dir=cache_dir).stdout.splitlines()
    second = sqlenv("play", "--seed", "11", cache_dir=cache_dir).stdout.splitlines()
    assert first[1:] == second[1:]  # the first line carries the random episode id


def test_interactive_play_reads_calls_from_stdin(cache_dir):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "env_core.cli",
            "play",
            "--interactive",
            "--db-id",
            "farm_shop",
            "--cache-dir",
            str(cache_dir),
        ],
        input="describe farms\nfly away\nsample farms abc\nsample farms 1\nanswer 42\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "table farms:" in result.stdout
    assert "type one of: describe TABLE | sample TABLE [N] | query SQL | answer VALUE" in (
        result.stdout
    )
    assert "type sample TABLE [N] (a quoted name may hold spaces)" in result.stdout
    assert "> sample(table='farms', n=1)" in result.stdout
    assert "The episode is over." in result.stdout


def test_prepare_prints_counts_reasons_and_warm_start(spider_dir, cache_dir):
    out = sqlenv(
        "data",
        "prepare",
        "--data-dir",
        str(spider_dir),
        "--split",
        "dev_without_wta_1",
        cache_dir=cache_dir,
    ).stdout
    assert "split dev_without_wta_1 (dev_without_wta_1.json): 972 questions, 896 kept" in out
    assert "excluded, gold empty: 49" in out
    assert "warm start:" in out


def test_a_directory_without_databases_is_a_clear_error(tmp_path):
    result = sqlenv("play", "--data-dir", str(tmp_path), cache_dir=tmp_path, check=False)
    assert result.returncode == 2
    assert "has no database/ folder" in result.stderr
    assert result.stdout == ""


def test_version_and_help_work_whatever_the_variables_hold():
    environment = {**os.environ, "SQLENV_MAX_STEPS": "abc", "SQLENV_LOG_LEVEL": "LOUD"}
    for arguments in (["--version"], ["--help"], ["play", "--help"], ["green", "--help"]):
        result = subprocess.run(
            [sys.executable, "-m", "env_core.cli", *arguments],
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert (result.returncode, result.stderr) == (0, ""), arguments
        assert result.stdout.startswith("sqlenv ") or result.stdout.startswith("usage: ")


def test_a_warning_is_a_line_of_the_command_not_a_logger_record(tmp_path):
    unwritable = tmp_path / "a-file"
    unwritable.write_text("")
    played = subprocess.run(
        [sys.executable, "-m", "env_core.cli", "play", "--cache-dir", str(unwritable / "cache")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    warnings = played.stderr.strip().splitlines()
    assert warnings and all(line.startswith("sqlenv play: cannot ") for line in warnings), warnings


def test_eval_says_so_while_it_starts_a_server_of_its_own(tmp_path, cache_dir):
    run = ["eval", "--policy", "oracle", "--episodes", "1", "--no-progress"]
    result = sqlenv(*run, "--door", "openenv", "--out", str(tmp_path / "run"), cache_dir=cache_dir)
    first = result.stderr.splitlines()[0]
    assert first == "sqlenv eval: starting sqlenv-openenv on a free port ..."


def test_prepare_all_splits_reports_each_split_as_soon_as_it_is_ready(spider_dir, tmp_path):
    command = [sys.executable, "-m", "env_core.cli", "data", "prepare", "--all-splits"]
    command += ["--data-dir", str(spider_dir), "--cache-dir", str(tmp_path)]  # cold: gold runs
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as prepare:
        arrivals = {line.split(" (")[0]: time.monotonic() for line in prepare.stdout}
    assert prepare.returncode == 0
    # The train split takes seconds to prepare; dev's report comes before it, not with it.
    assert arrivals["split train_spider_min"] - arrivals["split dev"] > 1.0
