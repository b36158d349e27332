"""Write small data folders in the layouts of datasets that cannot be downloaded here.

    python scripts/dataset_fixtures.py bird|spider2-lite|bird-large DIR [--rows N]

The content is this project's own (a made-up school fund database), shaped like the real
releases: BIRD's `dev.json` with evidence and difficulty, `dev_databases/<db>/<db>.sqlite` and
`database_description/<table>.csv`; Spider 2.0-lite's `spider2-lite.jsonl`, gold result CSVs
(with alternatives and condition columns) and external-knowledge documents. `bird-large` is a
BIRD folder whose one database is as large as BIRD's largest: a river gauge log of `--rows`
readings (4,000,000 by default: 303 MB), with golds that run for a while, one past the time
limit and one past the memory limit.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import sqlite3
from pathlib import Path

SCHOOL_FUND = """
CREATE TABLE schools (id INTEGER PRIMARY KEY, name TEXT, county TEXT, enrolment INTEGER);
CREATE TABLE grants (
    id INTEGER PRIMARY KEY, school_id INTEGER REFERENCES schools(id), year INTEGER, amount REAL
);
INSERT INTO schools VALUES
    (1, 'Alder Primary', 'Kent', 210), (2, 'Birch High', 'Kent', 940),
    (3, 'Cedar Academy', 'Essex', 620), (4, 'Damson School', 'Essex', 180);
INSERT INTO grants VALUES
    (1, 1, 2021, 12500.5), (2, 2, 2021, 48000.0), (3, 2, 2022, 51000.25),
    (4, 3, 2022, 30500.0), (5, 4, 2023, 9000.75), (6, 3, 2023, 31000.0);
"""

SCHOOL_FUND_DESCRIPTIONS = {
    "schools": [
        ("id", "school id", "unique id of the school", "integer", ""),
        ("name", "", "", "text", ""),
        ("county", "county name", "the county the school is in", "text", ""),
        ("enrolment", "", "number of pupils enrolled", "integer", "counted each September"),
    ],
    "grants": [
        ("id", "", "", "integer", ""),
        ("school_id", "school id", "the school receiving the grant", "integer", ""),
        ("year", "", "financial year the grant was paid", "integer", ""),
        ("amount", "", "grant in pounds", "real", "0 means the grant was withdrawn"),
    ],
}

BIRD_DEV = [
    {
        "db_id": "school_fund",
        "question": "How many schools are there in Kent?",
        "evidence": "Kent refers to county = 'Kent'",
        "SQL": "SELECT COUNT(*) FROM schools WHERE county = 'Kent'",
        "difficulty": "simple",
    },
    {
        "db_id": "school_fund",
        "question": "What was the total grant paid in 2022?",
        "evidence": "total grant refers to SUM(amount)",
        "SQL": "SELECT SUM(amount) FROM grants WHERE year = 2022",
        "difficulty": "simple",
    },
    {
        "db_id": "school_fund",
        "question": "List the names of the large schools, largest first.",
        "evidence": "large school refers to enrolment > 500",
        "SQL": "SELECT name FROM schools WHERE enrolment > 500 ORDER BY enrolment DESC",
        "difficulty": "moderate",
    },
    {
        "db_id": "school_fund",
        "question": "Which county received more grant money per pupil in 2022 and 2023?",
        "evidence": "per pupil refers to DIVIDE(SUM(amount), SUM(enrolment))",
        "SQL": "SELECT s.county FROM schools AS s JOIN grants AS g ON g.school_id = s.id "
        "WHERE g.year IN (2022, 2023) GROUP BY s.county "
        "ORDER BY SUM(g.amount) / SUM(s.enrolment) DESC LIMIT 1",
        "difficulty": "challenging",
    },
    {
        "db_id": "school_fund",
        "question": "Which schools received a grant in 2030?",
        "evidence": "",
        "SQL": "SELECT name FROM schools JOIN grants ON grants.school_id = schools.id "
        "WHERE year = 2030",
        "difficulty": "simple",
    },
    {
        "db_id": "river_gauges",
        "question": "How many gauges are there?",
        "evidence": "",
        "SQL": "SELECT COUNT(*) FROM gauges",
        "difficulty": "simple",
    },
]


def write_bird(folder: Path) -> None:
    """A BIRD-layout folder: one database, six dev questions (one with an empty gold, one on
    a database the folder lacks)."""
    database_dir = folder / "dev_databases" / "school_fund"
    (database_dir / "database_description").mkdir(parents=True)
    with contextlib.closing(sqlite3.connect(database_dir / "school_fund.sqlite")) as connection:
        connection.executescript(SCHOOL_FUND)
    for table, rows in SCHOOL_FUND_DESCRIPTIONS.items():
        with (database_dir / "database_description" / f"{table}.csv").open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(
                [
                    "original_column_name",
                    "column_name",
                    "column_description",
                    "data_format",
                    "value_description",
                ]
            )
            writer.writerows(rows)
    records = [{"question_id": index, **record} for index, record in enumerate(BIRD_DEV)]
    (folder / "dev.json").write_text(json.dumps(records, indent=2))


SPIDER2_LITE = [
    {
        "instance_id": "local001",
        "db": "school_fund",
        "question": "What is each county's grant total, largest first?",
        "external_knowledge": None,
    },
    {
        "instance_id": "local002",
        "db": "school_fund",
        "question": "Which school received the most money under the grant rules?",
        "external_knowledge": "grant_rules.md",
    },
    {
        "instance_id": "local003",
        "db": "school_fund",
        "question": "How many pupils are enrolled in each county?",
        "external_knowledge": None,
    },
    {
        "instance_id": "local004",
        "db": "school_fund",
        "question": "Which grants were withdrawn?",
        "external_knowledge": None,
    },
    {
        "instance_id": "bq001",
        "db": "school_fund",
        "question": "A BigQuery question, not served from SQLite.",
        "external_knowledge": None,
    },
]
SPIDER2_LITE_RULES = [
    {"instance_id": "local001", "condition_cols": [], "ignore_order": False},
    {"instance_id": "local002", "condition_cols": [0], "ignore_order": True},
    {"instance_id": "local003", "condition_cols": [1], "ignore_order": True},
    {"instance_id": "local004", "condition_cols": [], "ignore_order": True},
]
SPIDER2_LITE_RESULTS = {
    # Written from the gold SQL the project knows (not part of the layout).
    "local001": [["county", "total"], ["Kent", "111500.75"], ["Essex", "70500.75"]],
    # Two acceptable results: the rules are read by school name or by school id.
    "local002_a": [["name", "total"], ["Birch High", "99000.25"]],
    "local002_b": [["school_id", "total"], ["2", "99000.25"]],
    # Only the second column is checked: the answer may name the county any way.
    "local003": [["county", "pupils"], ["Kent", "1150"], ["Essex", "800"]],
}
GRANT_RULES = """# Grant rules

A school's money is the sum of its grants over every year. A grant whose amount is 0 was
withdrawn and counts for nothing.
"""


def write_spider2_lite(folder: Path) -> None:
    """A Spider 2.0-lite-layout folder: four SQLite questions (one without a gold result), one
    BigQuery question the layout skips, one external-knowledge document."""
    for name in ("databases", "documents", "gold/exec_result"):
        (folder / name).mkdir(parents=True)
    with contextlib.closing(sqlite3.connect(folder / "databases" / "school_fund.sqlite")) as db:
        db.executescript(SCHOOL_FUND)
    (folder / "documents" / "grant_rules.md").write_text(GRANT_RULES)
    lines = "".join(json.dumps(record) + "\n" for record in SPIDER2_LITE)
    (folder / "spider2-lite.jsonl").write_text(lines)
    rules = "".join(json.dumps(rule) + "\n" for rule in SPIDER2_LITE_RULES)
    (folder / "gold" / "spider2lite_eval.jsonl").write_text(rules)
    for name, rows in SPIDER2_LITE_RESULTS.items():
        with (folder / "gold" / "exec_result" / f"{name}.csv").open("w", newline="") as f:
            csv.writer(f).writerows(rows)


GAUGE_LOG = """
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
CREATE TABLE gauges (id INTEGER PRIMARY KEY, site TEXT, kind TEXT);
CREATE TABLE readings (
    id INTEGER PRIMARY KEY, gauge_id INTEGER REFERENCES gauges(id), taken_at INTEGER,
    level REAL, note TEXT
);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
INSERT INTO gauges
SELECT i, 'site ' || (i % 40), CASE i % 3 WHEN 0 THEN 'rain' WHEN 1 THEN 'flow' ELSE 'level' END
FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
INSERT INTO readings
SELECT i, 1 + i % 500, 1700000000 + i * 60, (i * 7919 % 100000) / 100.0,
       printf('reading %09d from gauge %03d, checked and filed', i, 1 + i % 500)
FROM n;
"""
GAUGE_LOG_DEV = [
    ("How many readings are there?", "SELECT COUNT(*) FROM readings", "simple"),
    (
        "What is the average level read by gauge 7?",
        "SELECT AVG(level) FROM readings WHERE gauge_id = 7",
        "simple",
    ),
    ("When was the last reading taken?", "SELECT MAX(taken_at) FROM readings", "simple"),
    (
        "What does reading 123456 say?",
        "SELECT note FROM readings WHERE id = 123456",
        "simple",
    ),
    (
        "Which three sites had the highest total level in the first 100,000 readings?",
        "SELECT g.site FROM readings AS r JOIN gauges AS g ON g.id = r.gauge_id "
        "WHERE r.id <= 100000 GROUP BY g.site ORDER BY SUM(r.level) DESC LIMIT 3",
        "moderate",
    ),
    # Past the agent's memory limit: the distinct notes are held in memory.
    (
        "How many different notes are there?",
        "SELECT COUNT(DISTINCT note) FROM readings",
        "moderate",
    ),
    # Past the agent's time limit: every early reading against every reading of its gauge.
    (
        "How many pairs of readings share a gauge?",
        "SELECT COUNT(*) FROM readings AS a JOIN readings AS b ON a.gauge_id = b.gauge_id "
        "WHERE a.id < 1000",
        "challenging",
    ),
]


def write_bird_large(folder: Path, rows: int) -> None:
    """A BIRD-layout folder with one large database (`rows` readings) and seven questions."""
    database_dir = folder / "dev_databases" / "gauge_log"
    database_dir.mkdir(parents=True)
    with contextlib.closing(sqlite3.connect(database_dir / "gauge_log.sqlite")) as connection:
        connection.executescript(GAUGE_LOG.format(rows=int(rows)))
    records = [
        {
            "question_id": index,
            "db_id": "gauge_log",
            "question": question,
            "evidence": "",
            "SQL": sql,
            "difficulty": difficulty,
        }
        for index, (question, sql, difficulty) in enumerate(GAUGE_LOG_DEV)
    ]
    (folder / "dev.json").write_text(json.dumps(records, indent=2))


SMALL_LAYOUTS = {"bird": write_bird, "spider2-lite": write_spider2_lite}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("layout", choices=sorted([*SMALL_LAYOUTS, "bird-large"]))
    parser.add_argument("folder", type=Path, help="a folder to create")
    parser.add_argument(
        "--rows", type=int, default=4_000_000, help="readings in bird-large's database"
    )
    args = parser.parse_args()
    args.folder.mkdir(parents=True)
    if args.layout == "bird-large":
        write_bird_large(args.folder, args.rows)
    else:
        SMALL_LAYOUTS[args.layout](args.folder)


if __name__ == "__main__":
    main()
