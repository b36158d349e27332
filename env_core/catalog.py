"""The question catalog of a data directory in one of the layouts `env_core.layouts` reads.

Every gold query is run once under the agent's safety limits; questions whose gold cannot serve
as an answer key are excluded with a reason. The prepared split is cached on disk under a key
made of the content hashes of the question file, the databases it names, the engine code that
prepares it and the limits. A cache file carries the hash of its own content: one that cannot
be read, is damaged or was edited is prepared again, and one that cannot be written leaves the
split served from memory, each with a warning in the log.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import hashlib
import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from env_core import sql_analysis
from env_core.answers import GoldAnswer
from env_core.errors import DataError, UnknownQuestionError, shown
from env_core.executor import ReadOnlyExecutor
from env_core.executor_limits import ExecutorLimits
from env_core.file_hashes import FileHashes
from env_core.gold_queries import GoldBounds, GoldFailure, GoldRun, run_golds
from env_core.layouts import ColumnNotes, Layout, QuestionRecord, detect_layout
from env_core.render import QueryResult

MAX_GOLD_ROWS = 100
MAX_GOLD_RESULT_BYTES = 1024 * 1024
_PREPARING_CODE = (
    *("catalog.py", "layouts.py", "gold_queries.py", "sql_analysis.py", "answers.py"),
    *("executor.py", "read_only.py", "result_budget.py", "schemas.py", "sandbox_worker.py"),
)
DATABASE_HASHES = "database-hashes.json"
# A cache file is this header, the SHA-256 of the rest, a newline, then the split as JSON.
_CACHE_HEADER = b"sqlenv catalog sha256:"
# Told, as a split is prepared, how many of its questions are done: (split, done, total).
Progress = Callable[[str, int, int], None]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Question:
    id: str
    split: str
    db_id: str
    text: str
    sql: str
    gold: GoldAnswer
    hardness: str  # the dataset's difficulty label; Spider hardness when it gives none
    dataset: str = "spider"
    evidence: str = ""  # a hint written with the question (BIRD), shown with it
    alternatives: tuple[GoldAnswer, ...] = ()  # other acceptable results (Spider 2.0-lite)

    @property
    def kind(self) -> str:
        return self.gold.kind

    @property
    def golds(self) -> tuple[GoldAnswer, ...]:
        """Every acceptable result: an answer matching any of them is right."""
        return (self.gold, *self.alternatives)


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

    def without_evidence(self) -> Split:
        questions = tuple(dataclasses.replace(q, evidence="") for q in self.questions)
        return dataclasses.replace(self, questions=questions)

    def exclusion_counts(self) -> Counter[str]:
        return Counter(exclusion.reason for exclusion in self.excluded)

    @functools.cached_property
    def fingerprint(self) -> str:
        """What the split asks, in 16 hex digits: two catalogs with the same fingerprint ask
        the same questions about the same databases and grade them with the same answers."""
        digest = hashlib.sha256()
        for question in self.questions:
            fields = (
                question.id,
                question.db_id,
                question.text,
                question.hardness,
                question.gold,
                *((question.dataset, question.evidence) if question.dataset != "spider" else ()),
                *question.alternatives,
            )
            digest.update(repr(fields).encode())
        return digest.hexdigest()[:16]


class Catalog:
    """Questions by split, id and database, over one data directory."""

    def __init__(self, layout: Layout, splits: dict[str, Split]) -> None:
        self.layout = layout
        self.root = layout.root
        self.splits = splits
        self._by_id = {q.id: q for split in splits.values() for q in split.questions}
        self._databases = {
            q.db_id: layout.database_path(q.db_id, q.split) for q in self._by_id.values()
        }
        # The questions of each selector asked for, found once: starting an episode asks again.
        self._selected: dict[tuple[str | None, str | None], tuple[Question, ...]] = {}

    @classmethod
    def load(
        cls,
        data_dir: Path,
        splits: Iterable[str] = ("dev",),
        *,
        cache_dir: Path | None = None,
        golds: GoldBounds | None = None,
        refresh: bool = False,
        databases_dir: Path | None = None,
        evidence: bool = True,
        progress: Progress = lambda _split, _done, _total: None,
    ) -> Catalog:
        """Load splits, from the cache when it is fresh; `refresh` re-runs every gold query.
        `golds`: how gold queries run (the agent's limits); `progress` is told how many
        questions of a split being prepared are done. `databases_dir` holds the databases a
        dataset does not ship (Spider's, for Spider-Syn); without `evidence` the questions
        carry none (an ablation of BIRD's hints)."""
        layout = detect_layout(Path(data_dir), Path(databases_dir) if databases_dir else None)
        golds = golds or GoldBounds()
        cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        loaded = {
            name: _load_split(layout, name, cache_dir, golds, refresh, progress)
            for name in dict.fromkeys(splits)
        }
        if not evidence:
            loaded = {name: split.without_evidence() for name, split in loaded.items()}
        return cls(layout, loaded)

    @functools.cache  # noqa: B019 - a catalog lives as long as its server
    def column_notes(self, db_id: str) -> ColumnNotes:
        """What the dataset says of the database's columns, for `describe`."""
        split = next((q.split for q in self._by_id.values() if q.db_id == db_id), "dev")
        return self.layout.column_notes(db_id, split)

    def database_path(self, db_id: str) -> Path:
        return self._databases.get(db_id) or self.layout.database_path(db_id, "dev")

    def question(self, question_id: str) -> Question:
        try:
            return self._by_id[question_id]
        except KeyError:
            raise UnknownQuestionError(
                f"no question {shown(question_id)} in the loaded splits "
                f"({', '.join(self.splits)}); ids look like '{self.example_id}'"
            ) from None

    @property
    def example_id(self) -> str:
        """What a question id of the first loaded split looks like, for error messages."""
        return f"{next(iter(self.splits), 'dev')}:12"

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


def question_files(data_dir: Path, databases_dir: Path | None = None) -> dict[str, Path]:
    """Every question file in the directory, by split name."""
    return detect_layout(Path(data_dir), databases_dir).question_files()


def _load_split(
    layout: Layout,
    name: str,
    cache_dir: Path,
    golds: GoldBounds,
    refresh: bool,
    progress: Progress,
) -> Split:
    started = time.perf_counter()
    source = layout.question_file(name)
    records = layout.records(source)
    db_ids = sorted({record.db_id for record in records})
    hashes = FileHashes(cache_dir / DATABASE_HASHES)
    key = _cache_key(layout, name, source, db_ids, golds, hashes)
    cache_file = cache_dir / f"{name}-{key}.json"
    cached = None if refresh else _read_cache(cache_file, name)
    if cached is not None:
        hashes.save()
        questions, excluded = cached
        return Split(name, source, questions, excluded, True, time.perf_counter() - started)
    questions, excluded = _prepare(layout, name, records, golds, progress)
    if _write_cache(cache_file, _encode(questions, excluded)):
        hashes.save()  # only beside a cache it keys: a cache folder that failed is left empty
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


def _write_cache(cache_file: Path, payload: dict) -> bool:
    """Write the cache atomically; whether it was. One that cannot be written costs the next
    start only."""
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
        return False
    return True


def _cache_key(
    layout: Layout,
    split: str,
    source: Path,
    db_ids: list[str],
    golds: GoldBounds,
    hashes: FileHashes,
) -> str:
    digest = hashlib.sha256(source.read_bytes())
    code_dir = Path(__file__).parent
    for code in _PREPARING_CODE:
        digest.update((code_dir / code).read_bytes())
    digest.update(repr((layout.dataset, golds.limits, golds.memory_mb, MAX_GOLD_ROWS)).encode())
    for db_id in db_ids:
        path = layout.database_path(db_id, split)
        digest.update(db_id.encode())
        digest.update(hashes.of(path) if path.is_file() else b"missing")
    return digest.hexdigest()[:20]


def _prepare(
    layout: Layout,
    split: str,
    records: list[QuestionRecord],
    golds: GoldBounds,
    progress: Progress,
) -> tuple[tuple[Question, ...], tuple[Exclusion, ...]]:
    problems = {
        db_id: _database_problem(layout, db_id, split, golds.limits)
        for db_id in dict.fromkeys(record.db_id for record in records)
    }
    runs = [
        GoldRun(layout.database_path(record.db_id, split), record.sql)
        for record in records
        if record.sql and problems[record.db_id] is None
    ]
    questions: list[Question] = []
    excluded: list[Exclusion] = []
    with contextlib.closing(run_golds(runs, golds, MAX_GOLD_ROWS)) as outcomes:
        for index, record in enumerate(records):
            question_id = f"{split}:{index}"
            problem = problems[record.db_id]
            if problem is not None:
                outcome: Question | Exclusion = Exclusion(question_id, record.db_id, *problem)
            elif record.sql:
                outcome = _grade_gold(next(outcomes), question_id, split, record)
            else:
                outcome = _grade_results(question_id, split, record)
            if isinstance(outcome, Question):
                questions.append(dataclasses.replace(outcome, dataset=layout.dataset))
            else:
                excluded.append(outcome)
            progress(split, index + 1, len(records))
    return tuple(questions), tuple(excluded)


def _database_problem(
    layout: Layout, db_id: str, split: str, limits: ExecutorLimits
) -> tuple[str, str] | None:
    """None when the database can be read, else the exclusion reason and detail."""
    path = layout.database_path(db_id, split)
    if not path.is_file():
        return "database missing", layout.missing_database(db_id, split)
    try:
        ReadOnlyExecutor(path, limits).close()
    except DataError as error:
        return "database unreadable", str(error)
    return None


def _grade_gold(
    outcome: QueryResult | GoldFailure, question_id: str, split: str, record: QuestionRecord
) -> Question | Exclusion:
    db_id, sql = record.db_id, record.sql

    def exclude(reason: str, detail: str) -> Exclusion:
        return Exclusion(question_id, db_id, reason, detail)

    if isinstance(outcome, GoldFailure):
        return exclude(outcome.reason, outcome.detail)
    result = outcome
    if result.truncated:
        return exclude("gold too large", f"more than {MAX_GOLD_ROWS} rows or over the size cap")
    if not result.rows:
        return exclude("gold empty", "the gold query returns no rows")
    if all(cell is None for row in result.rows for cell in row):
        return exclude("gold all NULL", "every cell of the gold result is NULL")
    try:
        ordered = sql_analysis.order_matters(sql) and len(result.rows) > 1
        hardness = record.difficulty or sql_analysis.spider_hardness(sql)
    except ValueError as error:
        return exclude("gold unparsable", str(error))
    gold = GoldAnswer(result.columns, result.rows, ordered)
    return Question(
        question_id, split, db_id, record.text, sql, gold, hardness, evidence=record.evidence
    )


def _grade_results(question_id: str, split: str, record: QuestionRecord) -> Question | Exclusion:
    """A question whose gold is given as result files: each must be a usable answer key."""

    def exclude(reason: str, detail: str) -> Exclusion:
        return Exclusion(question_id, record.db_id, reason, detail)

    golds = []
    if record.answer is not None:
        try:
            golds.append(_answer_gold(record.answer))
        except ValueError as error:
            return exclude("gold answer unusable", str(error))
    for path in record.gold_results:
        try:
            golds.append(_result_gold(path, record))
        except ValueError as error:
            return exclude("gold result unusable", f"{path.name}: {error}")
    if not golds:
        return exclude("gold missing", "no gold result file")
    first, *others = golds
    return Question(
        question_id,
        split,
        record.db_id,
        record.text,
        "",
        first,
        record.difficulty or "unrated",
        evidence=record.evidence,
        alternatives=tuple(others),
    )


def _answer_gold(answer: object) -> GoldAnswer:
    """The gold a question file gives as the answer itself: a value, a list of values (one per
    row) or a list of rows, as JSON or, in a CSV cell, as JSON text or else plain text. Its
    rows are compared in any order. ValueError if unusable."""
    if isinstance(answer, str):
        with contextlib.suppress(ValueError, RecursionError):
            answer = json.loads(answer)
    if not isinstance(answer, list):
        rows = [[answer]]
    elif answer and all(isinstance(row, list) for row in answer):
        rows = answer
    else:
        rows = [[value] for value in answer]
    if len(rows) > MAX_GOLD_ROWS:
        raise ValueError(f"more than {MAX_GOLD_ROWS} rows")
    width = max(map(len, rows), default=0)
    columns = ("answer",) if width == 1 else tuple(f"answer {n}" for n in range(1, width + 1))
    return GoldAnswer(columns, tuple(map(tuple, rows)), ordered=False)


def _result_gold(path: Path, record: QuestionRecord) -> GoldAnswer:
    """The gold a result CSV gives, cut to the condition columns; ValueError if unusable."""
    try:
        if path.stat().st_size > MAX_GOLD_RESULT_BYTES:
            raise ValueError(f"over {MAX_GOLD_RESULT_BYTES} bytes")
        with path.open(encoding="utf-8", newline="") as handle:
            header, *rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise ValueError(str(error)) from None
    if len(rows) > MAX_GOLD_ROWS:
        raise ValueError(f"more than {MAX_GOLD_ROWS} rows")
    kept = record.condition_columns or range(len(header))
    if any(not 0 <= index < len(header) for index in kept):
        raise ValueError("a condition column is not in the result")
    cells = [tuple(row[i] if i < len(row) and row[i] != "" else None for i in kept) for row in rows]
    ordered = not record.ignore_order and len(cells) > 1
    try:
        return GoldAnswer(tuple(header[i] for i in kept), tuple(cells), ordered, subset=True)
    except ValueError as error:  # empty, or entirely NULL
        raise ValueError(str(error)) from None


def _encode(questions: tuple[Question, ...], excluded: tuple[Exclusion, ...]) -> dict:
    return {
        "questions": [
            [
                *(q.id, q.db_id, q.text, q.sql, q.hardness, q.dataset, q.evidence),
                [[g.columns, g.rows, g.ordered, g.subset] for g in q.golds],
            ]
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
    qid, db_id, text, sql, hardness, dataset, evidence, golds = fields
    if not (_all_strings([qid, db_id, text, sql, hardness, dataset, evidence]) and golds):
        raise ValueError("a question has fields of the wrong type")
    gold, *alternatives = map(_decode_gold, golds)
    return Question(
        qid, split, db_id, text, sql, gold, hardness, dataset, evidence, tuple(alternatives)
    )


def _decode_gold(fields: list) -> GoldAnswer:
    columns, rows, ordered, subset = fields
    if not (
        isinstance(columns, list)
        and _all_strings(columns)
        and isinstance(rows, list)
        and all(isinstance(row, list) for row in rows)
        and isinstance(ordered, bool)
        and isinstance(subset, bool)
    ):
        raise ValueError("a gold answer has fields of the wrong type")
    return GoldAnswer(tuple(columns), tuple(map(tuple, rows)), ordered, subset)


def _decode_exclusion(fields: list) -> Exclusion:
    if not isinstance(fields, list) or len(fields) != 4 or not _all_strings(fields):
        raise ValueError("an exclusion must be four strings")
    return Exclusion(*fields)


def _all_strings(values: list) -> bool:
    return all(isinstance(value, str) for value in values)
