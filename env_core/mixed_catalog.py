"""Several datasets served as one catalog, for a run that draws from all of them.

The data location names them separated by `os.pathsep` (``:`` on Linux and macOS), each as
``[NAME=]DIR[@SPLIT]``. NAME defaults to the dataset the folder's layout reads (``spider``,
``spider-syn``, ``spider-dk``, ``bird``, ``spider2-lite``, ``own``), the dataset its questions
name when it is served alone; SPLIT defaults to the split the run asks for (a dataset whose
questions are in a file of another name, like Spider-DK's ``Spider-DK``, names it). One folder
with neither NAME nor SPLIT is one dataset, served as it always was.

Across datasets a question id is ``NAME/SPLIT:N`` and its dataset is NAME. A database keeps its
id unless two datasets give different files one name: then each is ``NAME/DB``. Spider-Syn
served beside Spider asks about Spider's own files, so they stay one database.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from env_core.catalog import Catalog, Question, Split
from env_core.errors import DataError, InvalidArgumentError, UnknownQuestionError, shown
from env_core.layouts import ColumnNotes, detect_layout

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class DataEntry:
    """One dataset of a data location: its name ("" until its layout names it), folder and, if
    it names one, its split."""

    name: str
    root: Path
    split: str | None = None

    def split_for(self, asked: str) -> str:
        return self.split or asked


def data_entries(location: str, databases_dir: Path | None = None) -> list[DataEntry] | None:
    """The datasets a data location names, or None when it is one plain folder. DataError
    for a location that cannot be read: an empty entry, a missing folder, a name used twice."""
    entries = [_parse(text) for text in location.split(os.pathsep)]
    if len(entries) == 1 and not entries[0].name and entries[0].split is None:
        return None
    for index, entry in enumerate(entries):
        if not entry.root.is_dir():
            where = f"dataset {entry.name!r}: " if entry.name else ""
            raise DataError(f"{where}{entry.root} is not a folder")
        if not entry.name:
            layout = detect_layout(entry.root, databases_dir)
            entries[index] = dataclasses.replace(entry, name=layout.dataset)
    names = [entry.name for entry in entries]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise DataError(
            f"two datasets are named {', '.join(map(repr, twice))}; name them apart with "
            "NAME=DIR (see docs/datasets.md)"
        )
    return entries


def _parse(text: str) -> DataEntry:
    if not text.strip():
        raise DataError(
            f"an empty dataset in the data location; datasets are separated by {os.pathsep!r}, "
            "each [NAME=]DIR[@SPLIT]"
        )
    name, equals, rest = text.partition("=")
    if not (equals and _NAME.fullmatch(name)):
        name, rest = "", text
    folder, at, split = rest.rpartition("@")
    if not (at and folder and _NAME.fullmatch(split)):
        folder, split = rest, ""
    return DataEntry(name, Path(folder), split or None)


class MixedCatalog:
    """The questions of several named catalogs, answering what a `Catalog` answers."""

    def __init__(self, catalogs: dict[str, Catalog], splits: dict[str, dict[str, str]]) -> None:
        """`splits`: for each split the run asks for, each dataset's split it takes."""
        self.catalogs = catalogs
        self._databases = _database_ids(catalogs)
        self._origins = {public: key for key, public in self._databases.items()}
        self._by_id: dict[str, Question] = {}
        self.splits: dict[str, Split] = {}
        for asked, taken in splits.items():
            parts = [(name, catalogs[name].splits[split]) for name, split in taken.items()]
            questions = tuple(self._renamed(n, q) for n, part in parts for q in part.questions)
            self._by_id.update((q.id, q) for q in questions)
            self.splits[asked] = Split(
                asked,
                parts[0][1].source,
                questions,
                tuple(
                    dataclasses.replace(e, id=f"{name}/{e.id}", db_id=self._public(name, e.db_id))
                    for name, part in parts
                    for e in part.excluded
                ),
                all(part.from_cache for _, part in parts),
                sum(part.load_seconds for _, part in parts),
            )
        self._selected: dict[tuple[str, str | None, str | None], tuple[Question, ...]] = {}

    @classmethod
    def load(
        cls,
        entries: list[DataEntry],
        splits: Iterable[str],
        databases_dir: Path | None,
        load: Callable[[Path, list[str]], Catalog],
    ) -> MixedCatalog:
        """Load each dataset's splits with `load(root, splits)`; every dataset's question
        files are found before any gold query runs, so a missing one loads nothing."""
        asked = list(dict.fromkeys(splits))
        taken = {s: {entry.name: entry.split_for(s) for entry in entries} for s in asked}
        check_question_files(entries, asked, databases_dir)
        catalogs = {
            entry.name: load(entry.root, list(dict.fromkeys(map(entry.split_for, asked))))
            for entry in entries
        }
        return cls(catalogs, taken)

    def _public(self, dataset: str, db_id: str) -> str:
        return self._databases.get((dataset, db_id), db_id)

    def _renamed(self, dataset: str, question: Question) -> Question:
        return dataclasses.replace(
            question,
            id=f"{dataset}/{question.id}",
            db_id=self._public(dataset, question.db_id),
            dataset=dataset,
        )

    def _origin(self, db_id: str) -> tuple[Catalog, str]:
        """The catalog that holds a database and its id there."""
        try:
            dataset, own = self._origins[db_id]
        except KeyError:
            known = f"no database {shown(db_id)} in the loaded datasets"
            raise UnknownQuestionError(known) from None
        return self.catalogs[dataset], own

    def column_notes(self, db_id: str) -> ColumnNotes:
        catalog, own = self._origin(db_id)
        return catalog.column_notes(own)

    def database_path(self, db_id: str) -> Path:
        catalog, own = self._origin(db_id)
        return catalog.database_path(own)

    def question(self, question_id: str) -> Question:
        try:
            return self._by_id[question_id]
        except KeyError:
            first, catalog = next(iter(self.catalogs.items()))
            raise UnknownQuestionError(
                f"no question {shown(question_id)} in the loaded datasets "
                f"({', '.join(self.catalogs)}); ids look like '{first}/{catalog.example_id}'"
            ) from None

    def questions(
        self, split: str | None = None, db_id: str | None = None, dataset: str | None = None
    ) -> tuple[Question, ...]:
        if dataset is not None and dataset not in self.catalogs:
            raise UnknownQuestionError(
                f"no dataset {shown(dataset)}; loaded datasets: {', '.join(self.catalogs)}"
            )
        if split is not None and split not in self.splits:
            raise UnknownQuestionError(
                f"split {shown(split)} is not loaded; loaded splits: {', '.join(self.splits)}"
            )
        key = (split or "", db_id, dataset)
        found = self._selected.get(key)
        if found is None:
            chosen = [self.splits[split]] if split else self.splits.values()
            found = tuple(
                q
                for s in chosen
                for q in s.questions
                if db_id in (None, q.db_id) and dataset in (None, q.dataset)
            )
            if not found:
                where = " of ".join(
                    f"{kind} {shown(value)}"
                    for kind, value in (("database", db_id), ("dataset", dataset))
                    if value
                )
                raise UnknownQuestionError(
                    f"no questions for {where or 'this catalog'} in split {split or 'any'}"
                )
            self._selected[key] = found
        return found


def check_question_files(
    entries: list[DataEntry], splits: Iterable[str], databases_dir: Path | None
) -> None:
    """DataError naming the dataset and the splits it has unless each has each split."""
    for entry in entries:
        try:
            layout = detect_layout(entry.root, databases_dir)
            for split in splits:
                layout.question_file(entry.split_for(split))
        except DataError as error:
            raise DataError(f"dataset {entry.name!r}: {error}") from None


def select_questions(
    catalog: Catalog | MixedCatalog, split: str, db_id: str | None, dataset: str | None
) -> tuple[Question, ...]:
    """The questions a selector names; a single dataset answers to its layout's name."""
    if isinstance(catalog, MixedCatalog):
        return catalog.questions(split, db_id, dataset)
    if dataset not in (None, catalog.layout.dataset):
        raise UnknownQuestionError(
            f"no dataset {shown(dataset)}; loaded datasets: {catalog.layout.dataset}"
        )
    return catalog.questions(split, db_id)


def check_limit(limit: object) -> None:
    """`InvalidArgumentError` unless `limit`, a count of questions to take, is None or a whole
    number, 1 or more: a slice would take -1 as "all but the last question" and 0 as none."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidArgumentError(f"limit must be a whole number, 1 or more, not {shown(limit)}")


def _database_ids(catalogs: dict[str, Catalog]) -> dict[tuple[str, str], str]:
    """Each dataset's databases by their id in the mix: their own, unless datasets give
    different files that name, then prefixed with the dataset's name."""
    asked = {name: _database_names(catalog) for name, catalog in catalogs.items()}
    files: dict[str, set[Path]] = {}
    for name, db_ids in asked.items():
        for db_id in db_ids:
            files.setdefault(db_id, set()).add(catalogs[name].database_path(db_id).resolve())
    return {
        (name, db_id): db_id if len(files[db_id]) == 1 else f"{name}/{db_id}"
        for name, db_ids in asked.items()
        for db_id in db_ids
    }


def _database_names(catalog: Catalog) -> set[str]:
    return {q.db_id for split in catalog.splits.values() for q in split.questions}
