"""Dataset layouts: how a data folder names its question files, records and databases.

One reader per layout, detected from the folder:

* **Spider** and its robustness variants: question files ``*.json`` (lists of records with
  ``db_id``, ``query`` and ``question``), databases at ``database/<db>/<db>.sqlite``. Spider-Syn's
  records hold ``SpiderSynQuestion`` (the rewrite, served) instead of ``question`` and it ships
  no databases; Spider-DK ships three of its own and labels each question with a ``type``;
  Spider-Realistic is plain Spider. A database the folder does not hold is looked for in the
  databases folder given beside it (Spider's ``database/``).
* **BIRD**: ``dev.json`` / ``train.json`` with ``question_id``, ``db_id``, ``question``,
  ``evidence``, ``SQL`` and ``difficulty``; databases at ``<split>_databases/<db>/<db>.sqlite``,
  column descriptions at ``<split>_databases/<db>/database_description/<table>.csv``.
* **Spider 2.0-lite, SQLite part**: ``spider2-lite.jsonl`` (records with ``instance_id``
  ``local###``, ``db``, ``question``, ``external_knowledge`` naming a file of ``documents/``;
  other ids are other engines' and are skipped), databases at ``databases/<db>.sqlite``, gold
  results at ``gold/exec_result/<id>.csv`` or several acceptable ``<id>_a.csv``, ``<id>_b.csv``…,
  and ``gold/spider2lite_eval.jsonl`` giving each id's ``condition_cols`` and ``ignore_order``.
  The external-knowledge document is the question's evidence.
* **Own databases**: SQLite files ``<db>.sqlite`` (or ``.db``) in the folder or its
  ``databases/``, and question files ``*.jsonl`` or ``*.csv`` with ``db_id``, ``question`` and
  ``sql`` (or, instead, the gold ``answer``), optionally ``evidence`` and ``difficulty``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from env_core.errors import DataError

ColumnNotes = dict[str, dict[str, str]]
log = logging.getLogger(__name__)

SPIDER_HARDNESS = ("easy", "medium", "hard", "extra")
DIFFICULTY_LEVELS = (*SPIDER_HARDNESS, "simple", "moderate", "challenging")
SPIDER_SPLIT_ALIASES = {"dev": ("dev",), "train": ("train_spider", "train_spider_min")}
MAX_QUESTION_FILE_BYTES = 512 * 1024 * 1024
MAX_DESCRIPTION_FILE_BYTES = 1024 * 1024
MAX_NOTE_CHARS = 200
MAX_DOCUMENT_CHARS = 8_000
SPIDER2_LITE_QUESTIONS = "spider2-lite.jsonl"
_OWN_DATABASE_SUFFIXES = (".sqlite", ".db")


def in_difficulty_order(labels: Iterable[str]) -> list[str]:
    """Labels in their dataset's order: Spider's hardness, BIRD's difficulty, then any other
    (Spider-DK's "type N") with its numbers compared as numbers."""
    known = {level: rank for rank, level in enumerate(DIFFICULTY_LEVELS)}

    def rank(label: str) -> tuple:
        if label in known:
            return (0, known[label])
        return (1, [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", label)])

    return sorted(set(labels), key=rank)


@dataclass(frozen=True)
class QuestionRecord:
    """One question as its dataset writes it, before its gold is run."""

    db_id: str
    text: str
    sql: str
    evidence: str = ""
    difficulty: str | None = None  # None: the Spider hardness of the gold SQL
    # A gold given as results instead of SQL (Spider 2.0-lite): any of the files is right,
    # checked on the condition columns (indexes; None: all), in order unless ignore_order.
    gold_results: tuple[Path, ...] = ()
    condition_columns: tuple[int, ...] | None = None
    ignore_order: bool = True
    # A gold given as the answer itself instead of SQL (your own): a value, a list of values or
    # a list of rows, or a CSV cell holding one (as JSON, else as text).
    answer: object = None


@dataclass(frozen=True)
class Layout:
    """A data folder read in one layout."""

    dataset: str
    root: Path
    databases_dir: Path | None = None

    def question_files(self) -> dict[str, Path]:
        """Every question file, by split name."""
        if self.dataset == "bird":
            return {p.stem: p for p in sorted(self.root.glob("*.json")) if _is_bird_split(p)}
        if self.dataset == "spider2-lite":
            return {"lite": self.root / SPIDER2_LITE_QUESTIONS}
        if self.dataset == "own":
            files = sorted([*self.root.glob("*.jsonl"), *self.root.glob("*.csv")])
            return {p.stem: p for p in files}
        return {p.stem: p for p in sorted(self.root.glob("*.json")) if p.name != "tables.json"}

    def question_file(self, split: str) -> Path:
        files = self.question_files()
        for stem in (*SPIDER_SPLIT_ALIASES.get(split, ()), split):
            if stem in files:
                return files[stem]
        raise DataError(
            f"no question file for split {split!r} in {self.root}; "
            f"available: {', '.join(files) or 'none'}"
        )

    def records(self, source: Path) -> list[QuestionRecord]:
        rows = _read_rows(source)
        if self.dataset == "spider2-lite":
            return self._spider2_lite_records(source, rows)
        read = {"bird": _bird_record, "own": _own_record}.get(self.dataset, _spider_record)
        records = []
        for index, row in enumerate(rows):
            try:
                records.append(read(row))
            except (KeyError, TypeError, ValueError) as error:
                raise DataError(f"{source}, record {index}: {error}") from None
        return records

    def _spider2_lite_records(self, source: Path, rows: list) -> list[QuestionRecord]:
        gold = self.root / "gold"
        rules = {}
        for row in _read_rows(gold / "spider2lite_eval.jsonl"):
            if isinstance(row, dict) and isinstance(row.get("instance_id"), str):
                rules[row["instance_id"]] = row
        records = []
        for index, row in enumerate(rows):
            try:
                instance = _text(row, "instance_id")
                if not instance.startswith("local"):
                    continue  # BigQuery or Snowflake: not served here
                rule = rules.get(instance, {})
                conditions = rule.get("condition_cols") or None
                if conditions is not None and not all(isinstance(i, int) for i in conditions):
                    raise ValueError("condition_cols must be column indexes")
                knowledge = _text(row, "external_knowledge", required=False)
                results = tuple(sorted((gold / "exec_result").glob(f"{instance}*.csv")))
                records.append(
                    QuestionRecord(
                        _text(row, "db"),
                        _text(row, "question"),
                        "",
                        self._document(knowledge) if knowledge else "",
                        "unrated",
                        tuple(p for p in results if _is_result_of(p, instance)),
                        tuple(conditions) if conditions else None,
                        bool(rule.get("ignore_order", True)),
                    )
                )
            except (KeyError, TypeError, ValueError, AttributeError) as error:
                raise DataError(f"{source}, record {index}: {error}") from None
        return records

    def _document(self, name: str) -> str:
        path = self.root / "documents" / Path(name).name
        try:
            with path.open(encoding="utf-8", errors="replace") as document:
                text = document.read(MAX_DOCUMENT_CHARS)
        except OSError as error:
            raise DataError(f"cannot read external-knowledge document {path}: {error}") from None
        return text.strip()

    def database_path(self, db_id: str, split: str) -> Path:
        """Where the database lives; the path may not exist (the question is then excluded)."""
        if self.dataset == "spider2-lite":
            return self.root / "databases" / f"{db_id}.sqlite"
        if self.dataset == "bird":
            return self.root / f"{split}_databases" / db_id / f"{db_id}.sqlite"
        if self.dataset == "own":
            for folder in (self.root, self.root / "databases"):
                for suffix in _OWN_DATABASE_SUFFIXES:
                    if (folder / f"{db_id}{suffix}").is_file():
                        return folder / f"{db_id}{suffix}"
            return self.root / f"{db_id}.sqlite"
        own = self.root / "database" / db_id / f"{db_id}.sqlite"
        if own.is_file() or self.databases_dir is None:
            return own
        return self.databases_dir / db_id / f"{db_id}.sqlite"

    def missing_database(self, db_id: str, split: str) -> str:
        """The exclusion detail of a question whose database is not there."""
        where = self.database_path(db_id, split)
        try:
            return f"no file {where.relative_to(self.root)}"
        except ValueError:
            return f"no file {db_id}/{db_id}.sqlite in the folder or in the databases folder"

    def column_notes(self, db_id: str, split: str) -> ColumnNotes:
        """What the dataset says of each column (BIRD's `database_description/<table>.csv`),
        by table and column name, casefolded; empty where it says nothing."""
        if self.dataset != "bird":
            return {}
        folder = self.database_path(db_id, split).parent / "database_description"
        notes: ColumnNotes = {}
        for path in sorted(folder.glob("*.csv")) if folder.is_dir() else []:
            table_notes = _description_notes(path)
            if table_notes:
                notes[path.stem.casefold()] = table_notes
        return notes


def _description_notes(path: Path) -> dict[str, str]:
    """A BIRD description file's notes by column; a file too large or unreadable gives none
    (logged), since the agent can still explore without them."""
    try:
        if path.stat().st_size > MAX_DESCRIPTION_FILE_BYTES:
            raise ValueError(f"over {MAX_DESCRIPTION_FILE_BYTES} bytes")
        # BIRD's files are mostly UTF-8, a few Latin-1.
        raw = path.read_bytes()
        text = raw.decode("utf-8") if raw.isascii() else raw.decode("utf-8", "replace")
        rows = list(csv.DictReader(text.lstrip("\ufeff").splitlines()))
    except (OSError, ValueError, csv.Error) as error:
        log.warning("cannot read the column descriptions %s (%s)", path, error)
        return {}
    notes = {}
    for row in rows:
        column = (row.get("original_column_name") or "").strip()
        note = _column_note(column, row)
        if column and note:
            notes[column.casefold()] = note[:MAX_NOTE_CHARS]
    return notes


def _column_note(column: str, row: dict[str, str | None]) -> str:
    """One line from BIRD's fields: the expanded name when it adds something, the
    description, the value description."""
    name, description, values = (
        " ".join((row.get(key) or "").split())
        for key in ("column_name", "column_description", "value_description")
    )
    said = {column.casefold(), column.casefold().replace("_", " ")}
    parts = list(dict.fromkeys(p for p in (name, description) if p and p.casefold() not in said))
    if values:
        parts.append(f"values: {values}")
    return "; ".join(parts)


def detect_layout(root: Path, databases_dir: Path | None = None) -> Layout:
    """The layout of a data folder, or a DataError naming what each layout expects."""
    if root.exists() and not root.is_dir():
        raise DataError(
            f"{root} is a file, not a data directory (pass --data-dir or SQLENV_DATA_DIR: the "
            "folder that holds the databases and question files)"
        )
    if not root.is_dir():
        raise DataError(f"no such directory: {root} (pass --data-dir or SQLENV_DATA_DIR)")
    if any(_is_bird_split(p) for p in root.glob("*.json")):
        return Layout("bird", root)
    if (root / SPIDER2_LITE_QUESTIONS).is_file():
        return Layout("spider2-lite", root)
    if any(root.glob("*.jsonl")) or any(root.glob("*.csv")):
        return Layout("own", root)
    spider_files = [p for p in sorted(root.glob("*.json")) if p.name != "tables.json"]
    if spider_files and ((root / "database").is_dir() or databases_dir is not None):
        return Layout(_spider_variant(spider_files[0]), root, databases_dir)
    if spider_files:
        raise DataError(
            f"{root} has Spider-format question files but no database/ folder: a dataset that "
            "ships no databases (Spider-Syn) needs Spider's, given with --databases-dir "
            "(or pass --data-dir or set SQLENV_DATA_DIR to another folder)"
        )
    raise DataError(
        f"{root} is not a data folder this environment reads: it has no database/ folder, no "
        "BIRD split and no question file *.jsonl or *.csv. Expected one of: Spider "
        "(database/<db>/<db>.sqlite and question files *.json), BIRD (dev.json or train.json "
        "and <split>_databases/<db>/<db>.sqlite), Spider 2.0-lite (spider2-lite.jsonl, "
        "databases/<db>.sqlite, gold/exec_result/<id>.csv), or your own (<db>.sqlite files "
        "and a question file *.jsonl or *.csv with db_id, question and sql or answer)"
    )


def _is_result_of(path: Path, instance: str) -> bool:
    """`<id>.csv` or `<id>_a.csv`: not the results of `<id>1`."""
    rest = path.stem[len(instance) :]
    return rest == "" or (len(rest) == 2 and rest[0] == "_" and rest[1].isalpha())


def _is_bird_split(path: Path) -> bool:
    return (path.parent / f"{path.stem}_databases").is_dir()


def _spider_variant(source: Path) -> str:
    """spider-syn or spider-dk from the fields of the first record; plain spider otherwise."""
    rows = _read_rows(source)
    first = rows[0] if rows and isinstance(rows[0], dict) else {}
    if "SpiderSynQuestion" in first:
        return "spider-syn"
    if "type" in first:
        return "spider-dk"
    return "spider"


def _read_rows(source: Path) -> list:
    try:
        if source.stat().st_size > MAX_QUESTION_FILE_BYTES:
            raise DataError(f"question file {source} is over {MAX_QUESTION_FILE_BYTES} bytes")
        text = source.read_text(encoding="utf-8")
        if source.suffix == ".csv":
            return list(csv.DictReader(text.splitlines()))
        if source.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        rows = json.loads(text)
    except (OSError, ValueError, RecursionError, csv.Error) as error:
        raise DataError(f"cannot read question file {source}: {error}") from error
    if not isinstance(rows, list):
        raise DataError(f"{source} must hold a JSON list of question records")
    return rows


def _text(row: dict, key: str, required: bool = True) -> str:
    value = row.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"needs a string field {key}")
    return value


def _spider_record(row: dict) -> QuestionRecord:
    if not isinstance(row, dict):
        raise TypeError("a record must be a JSON object")
    text = _text(row, "SpiderSynQuestion" if "SpiderSynQuestion" in row else "question")
    difficulty = f"type {row['type']}" if "type" in row else None
    return QuestionRecord(_text(row, "db_id"), text, _text(row, "query"), "", difficulty)


def _bird_record(row: dict) -> QuestionRecord:
    return _record_with_evidence(row, "SQL")


def _own_record(row: dict) -> QuestionRecord:
    """A record with a gold SQL query, or else with the gold answer itself."""
    answer = row.get("answer") if isinstance(row, dict) else None
    if answer is None or answer == "":
        return _record_with_evidence(row, "sql")
    if row.get("sql"):
        raise ValueError("gives both sql and answer: give the one the question is checked by")
    return dataclasses.replace(_record_with_evidence(row, None), answer=answer)


def _record_with_evidence(row: dict, sql_key: str | None) -> QuestionRecord:
    """A record with optional evidence and difficulty; its gold SQL under `sql_key` (None:
    it has none)."""
    if not isinstance(row, dict):
        raise TypeError("a record must be a JSON object")
    return QuestionRecord(
        _text(row, "db_id"),
        _text(row, "question"),
        _text(row, sql_key) if sql_key else "",
        _text(row, "evidence", required=False).strip(),
        _text(row, "difficulty", required=False) or None,
    )
