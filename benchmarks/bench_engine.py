"""In-process tool latency of the engine next to the raw sqlite3 floor, measured in one run.

For each sampled Spider question the benchmark makes the same calls two ways, interleaved:
through `Episode.call` (describe, sample, query with the gold SQL), and as the bare sqlite3
statements a minimal server would run on a reused read-only connection, with minimal text
formatting. It prints p50/p99 per tool and the ratios ours/floor. "sample 1st" and "query 1st"
are the first call of each distinct sample and query of the run alone: both sides compile the
statement then, and ours has no result kept for it yet. Ours runs a first query in process
when its compiled program is bounded, else in its sandbox ("query 1st" split by where it ran).

    python benchmarks/bench_engine.py --data-dir ../shared/data/spider
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import time
from collections import defaultdict
from pathlib import Path

from env_core.catalog import Catalog
from env_core.manager import EpisodeManager, SessionConfig
from env_core.read_only import quote_identifier
from env_core.sql_analysis import referenced_tables

# The first call of each distinct sample and query: ours runs a query's in the sandbox unless
# its program is bounded (see `env_core.programs`), and answers later calls of the same with the
# result kept (see `env_core.reuse.KeptResults`).
FIRST_CALL = {"sample": "sample 1st", "query": "query 1st"}
WHERE_RUN = {False: "query 1st, in process", True: "query 1st, in a worker"}


def floor_describe(connection: sqlite3.Connection, table: str) -> str:
    quoted = quote_identifier(table)
    columns = connection.execute(f"PRAGMA table_info({quoted})").fetchall()
    keys = connection.execute(f"PRAGMA foreign_key_list({quoted})").fetchall()
    (count,) = connection.execute(f"SELECT count(*) FROM {quoted}").fetchone()
    return f"{table} {count}\n" + "\n".join(f"{c[1]} {c[2]}" for c in columns) + str(keys)


def floor_rows(connection: sqlite3.Connection, sql: str, limit: int) -> str:
    cursor = connection.execute(sql)
    rows = cursor.fetchmany(limit + 1)
    header = " | ".join(d[0] for d in cursor.description)
    return header + "\n" + "\n".join(" | ".join(map(str, row)) for row in rows[:limit])


def bare_connection(path: Path) -> sqlite3.Connection:
    """The floor's connection: read-only, reused for every call."""
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)


def bare_call(connection: sqlite3.Connection, tool: str, arguments: dict) -> str:
    """A tool call as a minimal server would answer it: the bare statements, plain text."""
    if tool == "describe":
        return floor_describe(connection, arguments["table"])
    if tool == "sample":
        n = arguments.get("n", 5)
        sql = f"SELECT * FROM {quote_identifier(arguments['table'])} LIMIT {n}"
        return floor_rows(connection, sql, n)
    return floor_rows(connection, arguments["sql"], 20)


def percentile(samples: list[float], q: float) -> float:
    return (
        statistics.quantiles(samples, n=100, method="inclusive")[q - 1]
        if len(samples) > 1
        else samples[0]
    )


def measure(catalog: Catalog, split: str, questions: int, repeats: int, seed: int) -> dict:
    sessions = EpisodeManager(
        catalog, SessionConfig(split=split, max_steps=10**9, max_episodes=questions + 1)
    )
    chosen = random.Random(seed).sample(catalog.questions(split), questions)
    timings: dict[tuple[str, str], list[float]] = defaultdict(list)
    called: set[tuple[str, str, str]] = set()
    for question in chosen:
        episode = sessions.create(question_id=question.id)
        path = catalog.database_path(question.db_id)
        floor = bare_connection(path)
        tables = [episode.executor.resolve_table(t) for t in referenced_tables(question.sql)]
        calls = [("describe", {"table": t}) for t in tables]
        calls += [("sample", {"table": tables[0]}), ("query", {"sql": question.sql})]
        for _ in range(repeats):
            for tool, arguments in calls:
                started = time.perf_counter_ns()
                bare_call(floor, tool, arguments)
                floor_us = (time.perf_counter_ns() - started) / 1000
                jobs = sessions.sandbox.jobs
                started = time.perf_counter_ns()
                episode.call(tool, arguments)
                ours_us = (time.perf_counter_ns() - started) / 1000
                rows = [tool]
                call = (question.db_id, tool, repr(arguments))
                if tool in FIRST_CALL and call not in called:
                    called.add(call)
                    rows.append(FIRST_CALL[tool])
                    if tool == "query":
                        rows.append(WHERE_RUN[sessions.sandbox.jobs > jobs])
                for row in rows:
                    timings[(row, "floor")].append(floor_us)
                    timings[(row, "ours")].append(ours_us)
        floor.close()
        sessions.close(episode.episode_id)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--split", default="dev_without_wta_1")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    catalog = Catalog.load(args.data_dir, [args.split])
    timings = measure(catalog, args.split, args.questions, args.repeats, args.seed)
    print(f"{args.questions} questions of {args.split}, {args.repeats} repeats; latency in µs")
    print(
        f"{'tool':<23}{'floor p50':>10}{'floor p99':>10}{'ours p50':>10}{'ours p99':>10}"
        f"{'p50 ratio':>11}{'p99 ratio':>11}{'calls':>8}"
    )
    for tool in ("describe", "sample", "query", *FIRST_CALL.values(), *WHERE_RUN.values()):
        floor, ours = timings[(tool, "floor")], timings[(tool, "ours")]
        f50, f99, o50, o99 = (
            percentile(floor, 50),
            percentile(floor, 99),
            percentile(ours, 50),
            percentile(ours, 99),
        )
        print(
            f"{tool:<24}{f50:>9.1f}{f99:>10.1f}{o50:>10.1f}{o99:>10.1f}"
            f"{o50 / f50:>10.2f}x{o99 / f99:>10.2f}x{len(ours):>8}"
        )


if __name__ == "__main__":
    main()
