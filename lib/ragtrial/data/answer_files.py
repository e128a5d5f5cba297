"""Answers files (bring your own answers): reading and validating them, and `answers_file`, the
loader of a data set made of an answers file's questions (no documents).

The answers-file format (JSON Lines, CSV, Parquet or a JSON array of objects), one row per
(question_id, method):

- `question_id` (required): a question id of the run's data set (or of `answers_file`'s questions);
- `answer` (required): the answer text; empty only with a `failure`;
- `method`: which method answered; absent from every row: the file is one method, named by the
  setting (a file where some rows name it must name it in every row);
- `question`: the question text (what the `answers_file` loader reads);
- `contexts`: what the system showed its model, a list of strings or one string;
- `chunk_ids`, `entity_ids`, `relation_ids`: ids of the kit's index, when the system used it;
- `prompt_tokens`, `completion_tokens`, `calls` (integers), `latency_s` (seconds);
- `failure`: non-empty when that answer failed: recorded, never scored.

A retrieval file (`AnswerFile.retrieval`) holds what a system retrieved instead of answers: per
question `passage_ids` (the data set's document ids) or `titles` (each one passage's title), ranked
or not (`AnswerFile.ranked`); its rows find their question by `question_id` or, for published outputs
without ids, by the exact `question` text (`AnswerFile.match`).

In CSV a list field is a JSON array (or, for contexts, one string) and an empty cell is absent.
`AnswerFile.columns` maps the file's own names onto these fields. Errors name the file, the record
(`line N` of JSON Lines / CSV, the row index of Parquet / JSON) and the field; nothing is dropped.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ragtrial.config.data import data_path
from ragtrial.config.methods import AnswerFile
from ragtrial.data.reading import FieldReader, csv_rows, json_array, json_lines, type_name
from ragtrial.data.registry import DocsAndQuestions, register_loader
from ragtrial.records import DataError, Question

FORMATS = {".jsonl": "jsonl", ".csv": "csv", ".parquet": "parquet", ".json": "json"}
_REQUIRED = ("question_id", "answer")
_COUNTS = ("prompt_tokens", "completion_tokens", "calls")
_ID_LISTS = ("chunk_ids", "entity_ids", "relation_ids")
_RETRIEVED = ("passage_ids", "titles")


@dataclass(frozen=True)
class ImportedAnswer:
    """One row of an answers file, validated; `record` says where it sits (line N / row index)."""

    record: str | int
    question_id: str
    method: str | None
    text: str
    question: str = ""
    contexts: tuple[str, ...] = ()
    chunk_ids: tuple[str, ...] = ()
    entity_ids: tuple[str, ...] = ()
    relation_ids: tuple[str, ...] = ()
    passage_ids: tuple[str, ...] = ()
    titles: tuple[str, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    latency_s: float = 0.0
    failure: str = ""


def answer_file_path(spec: AnswerFile) -> Path:
    """Where an answers file is: absolute as given, relative under the data root (like data.path)."""
    return data_path(spec.path)


def _file_format(path: Path, format: str) -> str:
    if format != "auto":
        return format
    if path.suffix.lower() not in FORMATS:
        raise DataError(
            str(path),
            None,
            None,
            f"format auto: unknown suffix {path.suffix!r}; set format to one of "
            f"{', '.join(FORMATS.values())}",
        )
    return FORMATS[path.suffix.lower()]


def _records(path: Path, format: str) -> tuple[list[FieldReader], set[str] | None]:
    """The file's records and, for tabular formats, its column names (None: per-record fields)."""
    if format == "jsonl":
        return json_lines(path), None
    if format == "json":
        return json_array(path), None
    if format == "csv":
        rows = csv_rows(path, ())
        columns = set(rows[0].value) if rows else set()
        # An empty cell is an absent value in CSV.
        rows = [dataclasses.replace(r, value={k: v for k, v in r.value.items() if v != ""}) for r in rows]
        return rows, columns
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as err:
        raise DataError(str(path), None, None, f"not a readable Parquet file ({err})") from None
    rows = [
        FieldReader(path, i, {k: v for k, v in row.items() if not _missing(v)})
        for i, row in enumerate(frame.to_dict("records"))
    ]
    return rows, set(frame.columns)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _named(field: str, columns: dict[str, str]) -> str:
    """A field as the message names it: its column in the file, and the mapping when one is used."""
    return (
        f"{columns[field]} (answer_files columns: {field} -> {columns[field]})" if field in columns else field
    )


class _Row:
    """One record read through the column mapping: errors name the file's own column."""

    def __init__(self, rec: FieldReader, columns: dict[str, str], list_as_json: bool, tabular: bool):
        # tabular: the header has every column, so an absent value is an empty cell, not a missing field.
        self.rec, self.columns, self.list_as_json, self.tabular = rec, columns, list_as_json, tabular

    def error(self, field: str, problem: str) -> DataError:
        return self.rec.error(_named(field, self.columns), problem)

    def has(self, field: str) -> bool:
        return self.columns.get(field, field) in self.rec.value

    def raw(self, field: str) -> Any:
        return self.rec.value[self.columns.get(field, field)]

    def text(self, field: str, required: bool = False) -> str:
        if not self.has(field):
            if required and not self.tabular:
                raise self.error(field, "missing")
            return ""
        value = self.raw(field)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and field == "question_id":
            value = str(value)  # CSV and Parquet ids may be numbers
        if not isinstance(value, str):
            raise self.error(field, f"expected a string, got {type_name(value)}")
        return value.strip()

    def strings(self, field: str) -> tuple[str, ...]:
        if not self.has(field):
            return ()
        value = self.raw(field)
        if isinstance(value, str) and self.list_as_json and value.lstrip().startswith("["):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as err:
                raise self.error(field, f"invalid JSON array: {err.msg}") from None
        if isinstance(value, str) and field == "contexts":
            return (value,) if value.strip() else ()
        if hasattr(value, "tolist"):  # a Parquet list column arrives as a numpy array
            value = value.tolist()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(field, f"expected a list of strings, got {type_name(value)}")
        return tuple(value)

    def number(self, field: str, kind: type) -> Any:
        if not self.has(field):
            return kind(0)
        value = self.raw(field)
        try:
            if isinstance(value, bool):
                raise ValueError
            number = float(value)
            if not math.isfinite(number) or number < 0 or (kind is int and number != int(number)):
                raise ValueError
        except (TypeError, ValueError):
            what = "a non-negative integer" if kind is int else "a non-negative number"
            raise self.error(field, f"expected {what}, got {value!r}") from None
        return kind(number)


def read_answers(
    path: Path,
    format: str = "auto",
    columns: dict[str, str] | None = None,
    retrieval: bool = False,
    match: str = "question_id",
) -> list[ImportedAnswer]:
    """Every row of an answers file (a retrieval file with `retrieval`), validated (see the module
    docstring); DataError naming the file, the record and the field at the first problem: a missing
    required field, a field of the wrong type, a non-numeric count, an empty answer without a failure
    (a retrieval row without passage_ids or titles), a duplicate (question, method).
    """
    columns = columns or {}
    fmt = _file_format(path, format)
    if not path.is_file():
        raise DataError(str(path), None, None, "answers file not found")
    records, header = _records(path, fmt)
    required = (match,) if retrieval else _REQUIRED
    if header is not None:
        for field in required:
            if records and columns.get(field, field) not in header:
                raise DataError(
                    str(path), None, _named(field, columns), f"missing column (columns: {sorted(header)})"
                )
    answers: list[ImportedAnswer] = []
    first: dict[tuple[str, str | None], str | int] = {}
    for rec in records:
        row = _Row(rec, columns, list_as_json=fmt == "csv", tabular=header is not None)
        key_text = row.text(match, required=True)
        if not key_text:
            raise row.error(match, "empty")
        failure = row.text("failure")
        text = "" if retrieval else row.text("answer", required=True)
        if retrieval and not failure and not any(row.has(field) for field in _RETRIEVED):
            raise row.error(
                "passage_ids", "missing, and no titles either: a retrieval row names what it retrieved"
            )
        if not retrieval and not text and not failure:
            raise row.error(
                "answer", "empty, and no failure is given (an answer that failed names its failure)"
            )
        assert rec.record is not None  # every reader above numbers its records
        # Any: the spread fields have different types, which a dict's one value type cannot say.
        id_lists: dict[str, Any] = {field: row.strings(field) for field in (*_ID_LISTS, *_RETRIEVED)}
        answer = ImportedAnswer(
            record=rec.record,
            question_id=row.text("question_id"),
            method=row.text("method") or None,
            text=text,
            question=row.text("question"),
            contexts=row.strings("contexts"),
            **id_lists,
            **{field: row.number(field, int) for field in _COUNTS},
            latency_s=row.number("latency_s", float),
            failure=failure,
        )
        key = (key_text, answer.method)
        if key in first:
            method = f", method {answer.method!r}" if answer.method else ""
            what = "question" if match == "question_id" else "question text"
            raise row.error(
                match, f"duplicate answer to {what} {key_text!r}{method} (first at record {first[key]})"
            )
        first[key] = rec.record
        answers.append(answer)
    # a row without a method in a file whose other rows name theirs belongs to no method: reading
    # it as any one would be a guess, and dropping it would lose an answer silently
    named = [a for a in answers if a.method]
    if named and len(named) < len(answers):
        unnamed = next(a for a in answers if not a.method)
        raise DataError(
            str(path),
            unnamed.record,
            _named("method", columns),
            f"empty, while {len(named)} of {len(answers)} rows name their method (give every row one)",
        )
    return answers


def method_answers(name: str, spec: AnswerFile) -> dict[str, ImportedAnswer]:
    """The answers of imported method `name` by question id (by question text when `spec.match` is
    "question"): the rows of `spec.method` (default
    `name`) of a file with a method column, or every row of a file without one.
    """
    path = answer_file_path(spec)
    rows = read_answers(path, spec.format, spec.columns, spec.retrieval, spec.match)
    key = "question" if spec.match == "question" else "question_id"
    if not any(r.method for r in rows):
        return {getattr(r, key): r for r in rows}
    wanted = spec.method or name
    mine = {getattr(r, key): r for r in rows if r.method == wanted}
    if not mine:
        found = sorted({r.method or "" for r in rows})
        raise DataError(
            str(path), None, _named("method", spec.columns), f"no rows of method {wanted!r}; methods: {found}"
        )
    return mine


def check_question_ids(path: Path, answers: dict[str, ImportedAnswer], known: Collection[str]) -> None:
    """Every answered question id is a question of the data set (all of it, before any sampling)."""
    for answer in answers.values():
        if answer.question_id not in known:
            raise DataError(
                str(path),
                answer.record,
                "question_id",
                f"unknown question id {answer.question_id!r}: not a question of the run's data set",
            )


@register_loader("answers_file")
def _answers_file(
    root: Path, *, file: str, format: str = "auto", columns: dict[str, str] | None = None
) -> DocsAndQuestions:
    """The questions of an answers file (`file`, in the data set's folder): question_id and question of
    each row, once per question id (a multi-method file repeats them); question_type "imported"; no
    documents, so only methods that read no index can answer them.
    """
    path = root / file
    questions: dict[str, Question] = {}
    for row in read_answers(path, format, columns):
        if not row.question:
            raise DataError(
                str(path),
                row.record,
                _named("question", columns or {}),
                "missing: the questions are read from the file",
            )
        questions.setdefault(
            row.question_id,
            Question(question_id=row.question_id, question=row.question, question_type="imported"),
        )
    return [], list(questions.values())
