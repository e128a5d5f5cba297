"""Temporal correctness, model-free: whether the retrieved subgraph and the answer respect the
question's time window (seed 004's step 3).

A question's window is its generated-corpus `metadata["year"]` (the year asked about), else the
window its text names (`retrieval.time_window.question_window`); questions without one are not
checked. Relation validity is the index's `valid_from` / `valid_to` (`index.date_relations`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import pandas as pd

from ragtrial.index.merge_extractions import normalize_name
from ragtrial.index.tables import GraphIndex
from ragtrial.records import Question
from ragtrial.retrieval.time_window import Window, bounds, overlaps, question_window
from ragtrial.text import normalize_answer

COLUMNS = [
    "question_id",
    "method",
    "window_start",
    "window_end",
    "failure",
    "dated_relations",
    "in_window",
    "out_of_window",
    "time_filtered",
    "subgraph_respects",
    "answer_respects",
]


def question_time_window(question: Question) -> Window | None:
    """The years `question` asks about: metadata "year" (generated corpus), else its text's window."""
    year = question.metadata.get("year")
    return (int(year), int(year)) if year is not None else question_window(question.question)


def _names(text: str) -> str:
    return f" {normalize_answer(text)} "


def _names_any(text: str, names: Iterable[str]) -> bool:
    """Whether `text` names any of `names` (normalized, as whole words)."""
    padded = _names(text)
    return any(n.strip() and _names(n) in padded for n in names)


def _wrong_holders(question: Question, window: Window, gold: tuple[pd.DataFrame, pd.DataFrame]) -> set[str]:
    """Names that hold the question's relation for its subject at another time: for each gold edge
    with one end among the gold answers, the other end is the subject; the gold relations of that
    type from that subject whose validity misses the window give their answer-end entity (and aliases).
    """
    entities, relations = gold
    name_of = dict(zip(entities["entity_id"], entities["name"], strict=True))
    aliases = dict(zip(entities["entity_id"], entities["aliases"], strict=True))
    answers = {normalize_answer(a) for a in question.answers}
    lo, hi = bounds(relations["valid_from"], relations["valid_to"])
    outside = ~overlaps(lo, hi, window)
    held: set[str] = set()
    for edge in question.gold_edges:
        ends = {
            "source_id": (edge.source, "target_id", edge.target),
            "target_id": (edge.target, "source_id", edge.source),
        }
        for answer_end, (answer, subject_end, subject) in ends.items():
            if normalize_answer(answer) not in answers:
                continue
            same = (relations["relation"] == edge.relation).to_numpy() & outside
            same &= relations[subject_end].map(name_of).eq(subject).to_numpy()
            for holder in relations.loc[same, answer_end]:
                held.update([name_of[holder], *aliases[holder]])
    return {h for h in held if normalize_answer(h) not in answers}


def _matching_entities(index: GraphIndex, names: Sequence[str]) -> set[str]:
    """Index entity ids whose name is one of `names` or a noun phrase around one ("CEO Ada Lind")."""
    wanted = [f" {normalize_name(n)} " for n in names if normalize_name(n)]
    return {
        e
        for e, n in zip(index.entities["entity_id"], index.entities["name"], strict=True)
        if any(w in f" {normalize_name(n)} " for w in wanted)
    }


def temporal_checks(
    answers: pd.DataFrame,
    questions: Sequence[Question],
    index: GraphIndex,
    gold_graph: tuple[pd.DataFrame, pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """One row per answer to a question with a time window (answers: `answers_frame` rows).

    Answers use question_id, method, text, failure and the relations the context held:
    `retrieved_relation_ids` (`evaluation.diagnostics.retrieved_elements`: graph items and the
    relations extracted from shown passages) where present, else `context_relation_ids`. Columns:

    - dated_relations: those retrieved relations with a stated validity;
      in_window / out_of_window: of those, overlapping the window or not.
    - time_filtered: the relations and claims the answer's retrieval dropped as outside the window
      (its notes' `time_filtered`, `retrieval.time_filter`); <NA> when its retrieval applied no
      window (the filter off, a method that cannot be filtered such as global search, a fallback).
    - subgraph_respects: of the dated retrieved relations touching a gold entity of the question,
      none lies outside the window (False if one does; None when there is no such relation).
    - answer_respects: True when the answer names a gold answer and no wrong holder; False when it
      names an entity that holds the same gold relation for the question's subject at a time
      outside the window (from `gold_graph`, `data.experiment_dataset.gold_graph`'s
      (entities, relations)) and no gold answer; None (undetermined) otherwise, for a failed
      answer, and without a gold graph when the answer names no gold answer.
    """
    rels = index.relations
    lo, hi = bounds(rels["valid_from"], rels["valid_to"])
    dated = (rels["valid_from"].notna() | rels["valid_to"].notna()).to_numpy()
    row_of = {r: i for i, r in enumerate(rels["relation_id"])}
    by_id = {q.question_id: q for q in questions}
    held = "retrieved_relation_ids" if "retrieved_relation_ids" in answers else "context_relation_ids"
    rows = []
    for answer in answers.itertuples(index=False):
        question = by_id.get(answer.question_id)
        window = question_time_window(question) if question is not None else None
        if question is None or window is None:
            continue
        ok = overlaps(lo, hi, window)
        shown = [row_of[r] for r in getattr(answer, held) if r in row_of and dated[row_of[r]]]
        gold_ids = _matching_entities(index, question.gold_entities)
        touching = [
            r for r in shown if rels["source_id"].iat[r] in gold_ids or rels["target_id"].iat[r] in gold_ids
        ]
        notes = json.loads(answer.notes) if isinstance(getattr(answer, "notes", None), str) else {}
        names_gold = not answer.failure and _names_any(answer.text, question.answers)
        wrong = _wrong_holders(question, window, gold_graph) if gold_graph is not None else set()
        names_wrong = not answer.failure and _names_any(answer.text, wrong)
        rows.append(
            {
                "question_id": answer.question_id,
                "method": answer.method,
                "window_start": window[0],
                "window_end": window[1],
                "failure": answer.failure,
                "dated_relations": len(shown),
                "in_window": int(sum(ok[r] for r in shown)),
                "out_of_window": int(sum(not ok[r] for r in shown)),
                "time_filtered": notes.get("time_filtered"),
                "subgraph_respects": all(ok[r] for r in touching) if touching else None,
                "answer_respects": True
                if names_gold and not names_wrong
                else False
                if names_wrong and not names_gold
                else None,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS).astype(
        {
            "window_start": "Int64",
            "window_end": "Int64",
            "time_filtered": "Int64",
            "subgraph_respects": object,
            "answer_respects": object,
        }
    )
