"""Record a measurement for the docs: run a command, show its output as it comes, and write
its standard output to `docs/measurements/NAME.txt` under a line saying when, on what machine
and at which commit it ran. The pages include these files verbatim: timings cannot be
regenerated in CI. Records whose output holds no timing are run again by the tests
(`tests/docs/test_recorded_outputs.py`, and the conformance suite for its table).

    python scripts/docs/record.py bench_engine -- \\
        .venv/bin/python benchmarks/bench_engine.py --data-dir ../shared/data/spider
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MEASUREMENTS = REPO / "docs" / "measurements"


def machine() -> str:
    """The machine in one phrase: CPU model, cores, memory, OS and Python."""
    cpu = platform.machine()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    kib = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    return (
        f"{os.cpu_count()} cores ({cpu}), {round(kib / 2**20)} GiB, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    )


def commit() -> str:
    def git(*arguments: str) -> str:
        return subprocess.run(
            ["git", *arguments], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()

    # Recorded measurements are not the code measured: recording several in a row is clean.
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs/measurements")
    return git("rev-parse", "--short", "HEAD") + (" with uncommitted changes" if changed else "")


def record(name: str, command: list[str]) -> int:
    started = datetime.now(UTC)
    header = f"# recorded {started:%Y-%m-%d %H:%M} UTC on {machine()}; commit {commit()}"
    lines = [header, "$ " + shlex.join(command)]
    clock = time.monotonic()
    # Only stdout is the result: progress bars and logs on stderr go to the terminal alone.
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        sys.stdout.write(line)
        lines.append(line.rstrip("\n"))
    status = process.wait()
    if status != 0:
        print(f"record: {command[0]} exited with {status}; nothing written", file=sys.stderr)
        return status
    lines.append(f"# took {time.monotonic() - clock:.1f} s")
    MEASUREMENTS.mkdir(parents=True, exist_ok=True)
    (MEASUREMENTS / f"{name}.txt").write_text("\n".join(lines) + "\n")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/docs/record.py", description=__doc__)
    parser.add_argument("name", help="the file's name in docs/measurements, without .txt")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    arguments = parser.parse_args()
    command = arguments.command[1:] if arguments.command[:1] == ["--"] else arguments.command
    if not command:
        parser.error("give the command after --")
    return record(arguments.name, command)


if __name__ == "__main__":
    sys.exit(main())
