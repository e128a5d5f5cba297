"""Typed records shared by loaders, the corpus generator, the index and the experiments.

Every loader returns a `Dataset`; every table the kit persists is a DataFrame whose columns are
the fields of one of these records, so notebooks, CLI and tests see the same shapes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Document(Record):
    doc_id: str
    title: str = ""
    text: str
    source: str = ""
    date: str | None = None  # ISO date when the data has one (MultiHop-RAG published_at)
    metadata: dict[str, Any] = Field(default_factory=dict)


class GoldEdge(Record):
    source: str
    relation: str
    target: str
    # Years the fact holds, where the corpus states them (valid_to None with valid_from set: still holds).
    valid_from: int | None = None
    valid_to: int | None = None


class Question(Record):
    question_id: str
    question: str
    answers: list[str] = Field(default_factory=list)  # gold answer first, then aliases
    question_type: str = ""  # MultiHop-RAG type, MuSiQue hop count, generated-corpus kind, QFS level
    gold_doc_ids: list[str] = Field(default_factory=list)  # supporting documents / passages
    gold_entities: list[str] = Field(default_factory=list)
    gold_edges: list[GoldEdge] = Field(default_factory=list)
    reference_summaries: list[str] = Field(default_factory=list)  # query-focused summarization refs
    key_facts: list[str] = Field(default_factory=list)  # facts a correct answer must contain (seed 004)
    metadata: dict[str, Any] = Field(default_factory=dict)


class Dataset(Record):
    """A corpus and (optionally) its questions, as one loader returns them."""

    name: str
    documents: list[Document]
    questions: list[Question] = Field(default_factory=list)
    source_path: str = ""
    # Flaws of the published data kept as published, each naming file, record and field.
    warnings: list[str] = Field(default_factory=list)

    def documents_frame(self) -> pd.DataFrame:
        return records_frame(self.documents, Document)

    def questions_frame(self) -> pd.DataFrame:
        return records_frame(self.questions, Question)


def ordered_union(lists: Iterable[Iterable[str]]) -> list[str]:
    """Every id of `lists`, each once, in order of first appearance (chunks cited by ranked items,
    members of merged groups): order carries rank, so a set would lose it.
    """
    return list(dict.fromkeys(x for ids in lists for x in ids))


def records_frame(records: Sequence[Record], model: type[Record]) -> pd.DataFrame:
    """DataFrame with one column per model field, in field order (empty input keeps the columns)."""
    rows = [r.model_dump() for r in records]
    return pd.DataFrame(rows, columns=list(model.model_fields))


class DataError(ValueError):
    """Malformed input data: the message names the file, the record and the field."""

    def __init__(self, path: str, record: str | int | None, field: str | None, problem: str):
        self.path, self.record, self.field, self.problem = str(path), record, field, problem
        where = [f"file {path}"]
        if record is not None:
            where.append(f"record {record}")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{', '.join(where)}: {problem}")
