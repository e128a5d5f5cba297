"""The loader registry, the sampling options every loader shares and the final consistency check.

`register_loader(name)` registers a raw loader `(folder, **options) -> (documents, questions)` in
`LOADERS`, with its `publications.Publication` as metadata (keys `provides`, `published_at`,
`licence`, `folders`); the data-set modules of this package use it and the record checks below.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ragtrial.data.publications import PUBLICATIONS
from ragtrial.data.reading import FieldReader, collect_warnings, is_kind
from ragtrial.records import DataError, Dataset, Document, Question
from ragtrial.registry import Registry

DocsAndQuestions = tuple[list[Document], list[Question]]

LOADERS: Registry[Callable[..., Dataset]] = Registry("data set")

# ---------------------------------------------------------------- registry and sampling


def load_dataset(name: str, path: str | Path, **options: Any) -> Dataset:
    """Load data set `name` from folder `path`; options as documented on the loader."""
    return LOADERS.get(name)(path, **options)


def register_loader(name: str) -> Callable[[Callable[..., DocsAndQuestions]], Callable[..., Dataset]]:
    """Register a raw loader `(folder, **options) -> (documents, questions)` under `name`.

    The wrapper adds what every loader shares (the sampling options, the final consistency check
    and the data warnings, in `Dataset.warnings`), so no loader re-implements it.
    """

    def register(raw: Callable[..., DocsAndQuestions]) -> Callable[..., Dataset]:
        def load(
            path: str | Path,
            *,
            limit_questions: int | None = None,
            limit_documents: int | None = None,
            seed: int = 0,
            **options: Any,
        ) -> Dataset:
            _check_limits(limit_questions=limit_questions, limit_documents=limit_documents)
            root = Path(path)
            if not root.is_dir():
                raise DataError(str(root), None, None, "data set folder not found")
            with collect_warnings() as flaws:
                documents, questions = raw(root, **options)
            _check_consistent(root, documents, questions)
            questions = _sample(questions, limit_questions, random.Random(f"{seed}:questions"))
            documents = _limit_documents(documents, questions, limit_documents, seed)
            _check_something_to_evaluate(name, root, documents, questions, limit_documents)
            return Dataset(
                name=name, documents=documents, questions=questions, source_path=str(root), warnings=flaws
            )

        load.__name__ = load.__qualname__ = f"load_{name}"
        load.__doc__ = raw.__doc__
        load.__signature__ = _combined_signature(load, raw)  # type: ignore[attr-defined]
        description = " ".join((raw.__doc__ or name).strip().split("\n\n")[0].split())  # its first paragraph
        LOADERS.add(name, load, description, **vars(PUBLICATIONS[name]))
        return load

    return register


def _combined_signature(
    load: Callable[..., Dataset], raw: Callable[..., DocsAndQuestions]
) -> inspect.Signature:
    """The wrapper's shared options plus the raw loader's own ones, so help() shows every option."""
    shared = [p for p in inspect.signature(load).parameters.values() if p.kind != p.VAR_KEYWORD]
    own = list(inspect.signature(raw).parameters.values())[1:]  # drop the raw loader's folder argument
    return inspect.signature(load).replace(parameters=[*shared, *own])


def _check_limits(**limits: int | None) -> None:
    for option, value in limits.items():
        if value is not None and (not is_kind(value, int) or value < 0):
            raise ValueError(f"{option} must be a non-negative integer or None, got {value!r}")


def _sample(items: list[Any], limit: int | None, rng: random.Random) -> list[Any]:
    """A seeded random subset of `limit` items, in their original order."""
    if limit is None or limit >= len(items):
        return items
    keep = set(rng.sample(range(len(items)), limit))
    return [item for i, item in enumerate(items) if i in keep]


def _limit_documents(
    documents: list[Document], questions: list[Question], limit: int | None, seed: int
) -> list[Document]:
    if limit is None:
        return documents
    gold = {doc_id for q in questions for doc_id in q.gold_doc_ids}
    others = [d for d in documents if d.doc_id not in gold]
    extra = {d.doc_id for d in _sample(others, max(0, limit - len(gold)), random.Random(f"{seed}:documents"))}
    return [d for d in documents if d.doc_id in gold or d.doc_id in extra]


def _check_consistent(root: Path, documents: list[Document], questions: list[Question]) -> None:
    """Last line of defence: loaders check ids where they know the record; this catches the rest."""
    check_unique(
        ((d.doc_id, FieldReader(root, i, d)) for i, d in enumerate(documents)), "doc_id", "document id"
    )
    check_unique(
        ((q.question_id, FieldReader(root, i, q)) for i, q in enumerate(questions)),
        "question_id",
        "question id",
    )
    doc_ids = {d.doc_id for d in documents}
    for q in questions:
        missing = [g for g in q.gold_doc_ids if g not in doc_ids]
        if missing:
            raise DataError(str(root), q.question_id, "gold_doc_ids", f"no document with id {missing[0]!r}")


def _check_something_to_evaluate(
    name: str, root: Path, documents: list[Document], questions: list[Question], limit: int | None
) -> None:
    """A data set without a document (or, when its publication provides questions, without a
    question) leaves a run nothing to evaluate: it would load as 0 documents and measure nothing.
    """
    publication = PUBLICATIONS[name]
    limited = " after limit_documents=0" if limit == 0 and not documents else ""
    if not documents and not publication.documents_optional:
        raise DataError(
            str(root), None, None, f"no documents{limited}: the data set leaves nothing to evaluate"
        )
    if not questions and "questions" in publication.provides:
        raise DataError(str(root), None, None, "no questions: the data set leaves nothing to evaluate")


def check_unique(keyed: Iterable[tuple[str, FieldReader]], field: str, what: str) -> None:
    """Raise on the second record whose key repeats, naming that record and the first one."""
    first: dict[str, FieldReader] = {}
    for key, rec in keyed:
        if key in first:
            raise rec.error(field, f"duplicate {what} {key!r} (first seen at record {first[key].record})")
        first[key] = rec


def unique_questions(pairs: list[tuple[FieldReader, Question]], field: str) -> list[Question]:
    """Questions built from records of one file, after checking that their ids are unique there."""
    check_unique(((q.question_id, r) for r, q in pairs), field, "question id")
    return [q for _, q in pairs]
