"""The question catalog of a Spider-format data directory.

A data directory holds `database/<db_id>/<db_id>.sqlite`, an optional `tables.json`, and
question files (`*.json`, each a list of records with `db_id`, `question` and `query`; extra
fields of the full Spider format are ignored). Every gold query is run once under the agent's
safety limits; questions whose gold cannot serve as an answer key are excluded with a reason.
The prepared split is cached on disk under a key made of the content hashes of the question
file, the databases it names, the engine code that prepares it and the limits. A cache file
carries the hash of its own content: one that cannot be read, is damaged or was edited is
prepared again, and one that cannot be written leaves the split served from memory, each with a
warning in the log.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from env_core import sql_analysis
from env_core.answers import GoldAnswer
from env_core.errors import DataError, ToolError, UnknownQuestionError, shown
from env_core.executor import ExecutorLimits, ReadOnlyExecutor

SPLIT_ALIASES = {"dev": ("dev",), "train": ("train_spider", "train_spider_min")}
MAX_GOLD_ROWS = 100
_PREPARING_CODE = ("catalog.py", "sql_analysis.py", "executor.py", "answers.py")
# A cache file is this header, the SHA-256 of the rest, a newline, then the split as JSON.
_CACHE_HEADER = b"sqlenv catalog sha256:"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Question:
    id: str
    split: str
    db_id: str
    text: str
    sql: str
    gold: GoldAnswer
    hardness: str

    @property
    def kind(self) -> str:
        return self.gold.kind


@dataclass(frozen=True)
class Exclusion:
    id: str
    db_id: str
    reason: str
    detail: str


@dataclass(frozen=True)
class Split:
    name: str
    source: Path
    questions: tuple[Question, ...]
    excluded: tuple[Exclusion, ...]
    from_cache: bool
    load_seconds: float

    def exclusion_counts(self) -> Counter[str]:
        return Counter(exclusion.reason for exclusion in self.excluded)

    @functools.cached_property
    def fingerprint(self) -> str:
        """What the split asks, in 16 hex digits: two catalogs with the same fingerprint ask
        the same questions about the same databases and grade them with the same answers."""
        digest = hashlib.sha256()
        for question in self.questions:
            fields = (question.id, question.db_id, question.text, question.hardness, question.gold)
            digest.update(repr(fields).encode())
        return digest.hexdigest()[:16]


class Catalog:
    """Questions by split, id and database, over one data directory."""

    def __init__(self, root: Path, splits: dict[str, Split]) -> None:
        self.root = root
        self.splits = splits
        self._by_id = {q.id: q for split in splits.values() for q in split.questions}
        # The questions of each selector asked for, found once: starting an episode asks again.
        self._selected: dict[tuple[str | None, str | None], tuple[Question, ...]] = {}

    @classmethod
    def load(
        cls,
        data_dir: Path,
        splits: Iterable[str] = ("dev",),
        *,
        cache_dir: Path | None = None,
        limits: ExecutorLimits | None = None,
        refresh: bool = False,
    ) -> Catalog:
        """Load splits, from the cache when it is fresh; `refresh` re-runs every gold query."""
        data_dir = Path(data_dir)
        if not data_dir.is_dir():
            raise DataError(f"no such directory: {data_dir} (pass --data-dir or SQLENV_DATA_DIR)")
        if not (data_dir / "database").is_dir():
            raise DataError(
                f"{data_dir} is not a Spider-format data directory: it has no database/ folder "
                "(pass --data-dir or set SQLENV_DATA_DIR to a folder holding database/<db_id>/"
                "<db_id>.sqlite and question files)"
            )
        limits = limits or ExecutorLimits()
        cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        loaded = {
            name: _load_split(data_dir, name, cache_dir, limits, refresh)
            for name in dict.fromkeys(splits)
        }
        return cls(data_dir, loaded)

    def database_path(self, db_id: str) -> Path:
        return database_path(self.root, db_id)

    def question(self, question_id: str) -> Question:
        try:
            return self._by_id[question_id]
        except KeyError:
            raise UnknownQuestionError(
                f"no question {shown(question_id)} in the loaded splits "
                f"({', '.join(self.splits)}); ids look like 'dev:12'"
            ) from None

    def questions(self, split: str | None = None, db_id: str | None = None) -> tuple[Question, ...]:
        if split is not None and split not in self.splits:
            raise UnknownQuestionError(
                f"split {shown(split)} is not loaded; loaded splits: {', '.join(self.splits)}"
            )
        found = self._selected.get((split, db_id))
        if found is None:
            chosen = [self.splits[split]] if split else self.splits.values()
            found = tuple(q for s in chosen for q in s.questions if db_id in (None, q.db_id))
            if not found:
                where = f"database {shown(db_id)}" if db_id else "this catalog"
                raise UnknownQuestionError(f"no questions for {where} in split {split or 'any'}")
            self._selected[(split, db_id)] = found
        return found


def default_cache_dir() -> Path:
    configured = os.environ.get("SQLENV_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sqlenv"


def database_path(root: Path, db_id: str) -> Path:
    return root / "database" / db_id / f"{db_id}.sqlite"


def question_files(data_dir: Path) -> dict[str, Path]:
    """Every question file in the directory, by split name (file stem)."""
    return {p.stem: p for p in sorted(data_dir.glob("*.json")) if p.name != "tables.json"}


def question_file(data_dir: Path, split: str) -> Path:
    files = question_files(data_dir)
    for stem in SPLIT_ALIASES.get(split, (split,)):
        if stem in files:
            return files[stem]
    raise DataError(
        f"no question file for split {split!r} in {data_dir}; "
        f"available: {', '.join(files) or 'none'}"
    )


def _load_split(
    data_dir: Path, name: str, cache_dir: Path, limits: ExecutorLimits, refresh: bool
) -> Split:
    started = time.perf_counter()
    source = question_file(data_dir, name)
    records = _read_records(source)
    db_ids = sorted({record["db_id"] for record in records})
    cache_file = cache_dir / f"{name}-{_cache_key(data_dir, source, db_ids, limits)}.json"
    cached = None if refresh else _read_cache(cache_file, name)
    if cached is not None:
        questions, excluded = cached
        return Split(name, source, questions, excluded, True, time.perf_counter() - started)
    questions, excluded = _prepare(data_dir, name, records, limits)
    _write_cache(cache_file, _encode(questions, excluded))
    return Split(name, source, questions, excluded, False, time.perf_counter() - started)


def _read_cache(
    cache_file: Path, split: str
) -> tuple[tuple[Question, ...], tuple[Exclusion, ...]] | None:
    """The cached split, or None when there is none or it cannot be trusted (then it is
    prepared again and the cache rewritten)."""
    try:
        content = cache_file.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        log.warning("cannot read the catalog cache %s (%s); preparing it again", cache_file, error)
        return None
    header, _, payload = content.partition(b"\n")
    if header != _CACHE_HEADER + hashlib.sha256(payload).hexdigest().encode():
        log.warning(
            "the catalog cache %s is damaged or was edited (its content does not match its "
            "hash); preparing the split again",
            cache_file,
        )
        return None
    try:
        return _decode(split, json.loads(payload))
    except (ValueError, TypeError, KeyError, RecursionError) as error:
        log.warning(
            "the catalog cache %s does not hold a valid split (%s); preparing it again",
            cache_file,
            error,
        )
        return None


def _write_cache(cache_file: Path, payload: dict) -> None:
    """Write the cache atomically. One that cannot be written costs the next start only."""
    content = json.dumps(payload).encode()
    content = _CACHE_HEADER + hashlib.sha256(content).hexdigest().encode() + b"\n" + content
    partial = cache_file.with_name(f"{cache_file.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(content)
        partial.replace(cache_file)
    except OSError as error:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        log.warning(
            "cannot write the catalog cache in %s (%s); serving the catalog from memory, "
            "the next start prepares it again",
            cache_file.parent,
            error,
        )


def _read_records(source: Path) -> list[dict]:
    try:
        records = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:  # RecursionError: nested too deep
        raise DataError(f"cannot read question file {source}: {error}") from error
    if not isinstance(records, list):
        raise DataError(f"{source} must hold a JSON list of question records")
    for index, record in enumerate(records):
        if not isinstance(record, dict) or not all(
            isinstance(record.get(key), str) for key in ("db_id", "question", "query")
        ):
            raise DataError(
                f"{source}, record {index}: needs string fields db_id, question and query"
            )
    return records


def _cache_key(data_dir: Path, source: Path, db_ids: list[str], limits: ExecutorLimits) -> str:
    digest = hashlib.sha256(source.read_bytes())
    code_dir = Path(__file__).parent
    for code in _PREPARING_CODE:
        digest.update((code_dir / code).read_bytes())
    digest.update(repr((limits, MAX_GOLD_ROWS)).encode())
    for db_id in db_ids:
        path = database_path(data_dir, db_id)
        digest.update(db_id.encode())
        digest.update(_file_hash(path) if path.is_file() else b"missing")
    return digest.hexdigest()[:20]


def _file_hash(path: Path) -> bytes:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").digest()


def _prepare(
    data_dir: Path, split: str, records: list[dict], limits: ExecutorLimits
) -> tuple[tuple[Question, ...], tuple[Exclusion, ...]]:
    questions: list[Question] = []
    excluded: list[Exclusion] = []
    executors: dict[str, ReadOnlyExecutor | tuple[str, str]] = {}
    try:
        for index, record in enumerate(records):
            question_id, db_id = f"{split}:{index}", record["db_id"]
            if db_id not in executors:
                executors[db_id] = _open_database(data_dir, db_id, limits)
            outcome = _grade_gold(executors[db_id], question_id, split, record)
            (questions if isinstance(outcome, Question) else excluded).append(outcome)
    finally:
        for executor in executors.values():
            if isinstance(executor, ReadOnlyExecutor):
                executor.close()
    return tuple(questions), tuple(excluded)


def _open_database(
    data_dir: Path, db_id: str, limits: ExecutorLimits
) -> ReadOnlyExecutor | tuple[str, str]:
    """An executor on the database, or the exclusion reason and detail when there is none."""
    path = database_path(data_dir, db_id)
    if not path.is_file():
        return "database missing", f"no file database/{db_id}/{db_id}.sqlite"
    try:
        return ReadOnlyExecutor(path, limits)
    except DataError as error:
        return "database unreadable", str(error)


def _grade_gold(
    executor: ReadOnlyExecutor | tuple[str, str], question_id: str, split: str, record: dict
) -> Question | Exclusion:
    db_id, sql = record["db_id"], record["query"]

    def exclude(reason: str, detail: str) -> Exclusion:
        return Exclusion(question_id, db_id, reason, detail)

    if not isinstance(executor, ReadOnlyExecutor):
        return exclude(*executor)
    try:
        result = executor.query(sql, max_rows=MAX_GOLD_ROWS)
    except ToolError as error:
        reason = "gold timed out" if "time limit" in str(error) else "gold failed"
        return exclude(reason, str(error))
    if result.truncated:
        return exclude("gold too large", f"more than {MAX_GOLD_ROWS} rows or over the size cap")
    if not result.rows:
        return exclude("gold empty", "the gold query returns no rows")
    if all(cell is None for row in result.rows for cell in row):
        return exclude("gold all NULL", "every cell of the gold result is NULL")
    try:
        ordered = sql_analysis.order_matters(sql) and len(result.rows) > 1
        hardness = sql_analysis.spider_hardness(sql)
    except ValueError as error:
        return exclude("gold unparsable", str(error))
    gold = GoldAnswer(result.columns, result.rows, ordered)
    return Question(question_id, split, db_id, record["question"], sql, gold, hardness)


def _encode(questions: tuple[Question, ...], excluded: tuple[Exclusion, ...]) -> dict:
    return {
        "questions": [
            [q.id, q.db_id, q.text, q.sql, q.hardness, q.gold.columns, q.gold.rows, q.gold.ordered]
            for q in questions
        ],
        "excluded": [[e.id, e.db_id, e.reason, e.detail] for e in excluded],
    }


def _decode(split: str, payload: object) -> tuple[tuple[Question, ...], tuple[Exclusion, ...]]:
    """The split a cache holds; ValueError when it holds anything else."""
    if not isinstance(payload, dict):
        raise ValueError("not a JSON object")
    questions, excluded = payload["questions"], payload["excluded"]
    if not isinstance(questions, list) or not isinstance(excluded, list):
        raise ValueError("questions and excluded must be lists")
    return (
        tuple(_decode_question(split, fields) for fields in questions),
        tuple(_decode_exclusion(fields) for fields in excluded),
    )


def _decode_question(split: str, fields: list) -> Question:
    qid, db_id, text, sql, hardness, columns, rows, ordered = fields
    if not (
        _all_strings([qid, db_id, text, sql, hardness])
        and isinstance(columns, list)
        and _all_strings(columns)
        and isinstance(rows, list)
        and all(isinstance(row, list) for row in rows)
        and isinstance(ordered, bool)
    ):
        raise ValueError("a question has fields of the wrong type")
    gold = GoldAnswer(tuple(columns), tuple(map(tuple, rows)), ordered)
    return Question(qid, split, db_id, text, sql, gold, hardness)


def _decode_exclusion(fields: list) -> Exclusion:
    if not isinstance(fields, list) or len(fields) != 4 or not _all_strings(fields):
        raise ValueError("an exclusion must be four strings")
    return Exclusion(*fields)


def _all_strings(values: list) -> bool:
    return all(isinstance(value, str) for value in values)
