"""Cold and warm preparation of a data folder's splits: wall time and resident memory (this
process and its SQL workers) before, at the peak and after, each in a fresh cache.

    python benchmarks/bench_prepare.py --data-dir ../shared/data/spider --splits dev,train
    python scripts/dataset_fixtures.py bird-large runs/bird-large
    python benchmarks/bench_prepare.py --data-dir runs/bird-large --splits dev
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

# The repository before tests/, so the namespace tests/doors never shadows the doors package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from process_memory import MIB, PeakRSS, tree_rss

from env_core.factory import load_catalog
from env_core.settings import Settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--splits", default="dev", help="comma-separated (dev,train)")
    args = parser.parse_args()
    splits = args.splits.split(",")
    load = os.getloadavg()[0]
    print(f"load average (1 min) {load:.1f} on {os.cpu_count()} cores at the start")
    with tempfile.TemporaryDirectory() as cache:
        settings = Settings(data_dir=args.data_dir, cache_dir=cache)
        for start in ("cold", "warm"):
            with PeakRSS() as peak:
                began = time.perf_counter()
                catalog = load_catalog(settings, splits)
                took = time.perf_counter() - began
            after = tree_rss(os.getpid()) / MIB
            kept = ", ".join(f"{n} {len(s.questions)} kept" for n, s in catalog.splits.items())
            print(
                f"{start}: {took:.3f} s; resident {peak.before / MIB:.0f} MiB before, "
                f"{peak.bytes / MIB:.0f} MiB at the peak, {after:.0f} MiB after ({kept})"
            )


if __name__ == "__main__":
    main()
