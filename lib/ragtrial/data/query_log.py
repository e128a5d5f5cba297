"""A production query log (CSV or JSON Lines of questions) as a test set without gold (seed 004).

"If you have a deployed system, mine your query logs": the questions come as users asked them,
with no gold answers, documents, entities or edges, so only the diagnostics that need no gold
(grounding, citation coverage) can score them; `questions.log_sampling.sample_log` turns the log
into a test set by cluster-proportional sampling.
"""

from __future__ import annotations

import re
from pathlib import Path

from ragtrial.data.reading import FieldReader, _stable_hash, csv_rows, is_kind, json_lines
from ragtrial.data.registry import DocsAndQuestions, register_loader
from ragtrial.data.text_folders import DEFAULT_EXCLUDE, text_documents
from ragtrial.records import DataError, Question


def _normalized(question: str) -> str:
    """The duplicate key: case and runs of whitespace do not make a question different."""
    return re.sub(r"\s+", " ", question).strip().casefold()


def _count(rec: FieldReader, column: str) -> int:
    value = rec.get(column, (str, int))
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        value = int(value)
    if not is_kind(value, int) or value < 1:
        raise rec.error(column, f"expected a positive whole count, got {value!r}")
    return value


def _records(path: Path, question_column: str, count_column: str | None) -> list[FieldReader]:
    if path.suffix == ".csv":
        return csv_rows(path, [question_column, *([count_column] if count_column else [])])
    if path.suffix in (".jsonl", ".ndjson"):
        return json_lines(path)
    raise DataError(str(path), None, None, "a query log is a .csv or a .jsonl (JSON Lines) file")


@register_loader("query_log")
def _query_log(
    root: Path,
    *,
    file: str = "queries.csv",
    question_column: str = "question",
    count_column: str | None = None,
    corpus: str | None = None,
) -> DocsAndQuestions:
    """A production query log: `file` in the folder (.csv or .jsonl), one question per record.

    `question_column` names the question field; `count_column` (optional) how often it was asked
    (a positive integer; without it each record counts once). Repeats of one question (ignoring case
    and whitespace) are one question whose metadata frequency is the sum of their counts, spelt as
    first seen. question_id = "log-" + sha1(normalized text)[:12]; question_type "log"; metadata
    no_gold_answers=True, retrieval_only=True (no gold of any kind), frequency, first_record. The
    documents are the text files of the sub-folder `corpus` (as the text_folder loader reads them),
    none without it.
    """
    path = root / file
    questions: dict[str, Question] = {}
    for rec in _records(path, question_column, count_column):
        text = rec.text(question_column).strip()
        count = _count(rec, count_column) if count_column else 1
        key = _normalized(text)
        if key in questions:
            questions[key].metadata["frequency"] += count
            continue
        questions[key] = Question(
            question_id=f"log-{_stable_hash(key)}",
            question=text,
            question_type="log",
            metadata={
                "no_gold_answers": True,
                "retrieval_only": True,
                "frequency": count,
                "first_record": rec.record,
            },
        )
    if not questions:
        raise DataError(str(path), None, question_column, "no questions in the log")
    documents = text_documents(root / corpus, ("*.txt", "*.md"), DEFAULT_EXCLUDE) if corpus else []
    return documents, list(questions.values())
