"""Contradiction handling (seed 004, protocol step 4).

On a question whose sources state different values, does the answer surface the conflict or
silently pick one value?

A question is in scope when its metadata has "claims" (the generated corpus: one {value, source,
doc_id} per conflicting statement); others are left out, and the caller reports the measure
unavailable for them. Each answer is classified, first match wins:
- "no answer": the method produced none (a recorded failure or no text);
- "declined": it refuses (`metrics.is_declined`);
- "both_with_provenance": it names every value and, for each, its provenance: the source that states
  it, or a `[n]` citation, in the same clause as the value, of a context entry that states the value;
- "both_values": it names every value, not every value's provenance;
- "flagged": it says the sources disagree (`metrics.flags_conflict`) without naming every value;
- "silent_pick": it names some values, not all, and does not flag the conflict (the seed's failure;
  with two values: it picks one);
- "other": it names none of the values and flags nothing.
Values and sources are matched normalized (`metrics.answer_contained`).

Frame: one row per answer of an in-scope question (question_id, method, values, values_named,
provenance_named, handling, failure); `failure` is True for "silent_pick" only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from ragtrial.evaluation.answer_metrics import answer_contained, cited_entries, flags_conflict, is_declined
from ragtrial.evaluation.grounding import answer_text
from ragtrial.retrieval.packing import context_entries

if TYPE_CHECKING:
    from ragtrial.records import Question

HANDLING = (
    "both_with_provenance",
    "both_values",
    "flagged",
    "silent_pick",
    "declined",
    "no answer",
    "other",
)
COLUMNS = ["question_id", "method", "values", "values_named", "provenance_named", "handling", "failure"]
# One entry of the numbered context as retrieval.packing.format_context renders it: "[n] (kind) text".
# A clause of an answer ends after its citation markers ("Ann Lee [1], Bo Ek [3]": two clauses).
_CLAUSE_END = re.compile(r"(?:\s*\[\s*\d+(?:\s*[,;]\s*\d+)*\s*\])+")


def cited_clauses(answer: str) -> list[tuple[str, list[int]]]:
    """The answer split into clauses, each ending with the citation markers that follow it: (clause
    text, the entry numbers it cites); text after the last marker is a clause citing nothing.
    """
    clauses, start = [], 0
    for m in _CLAUSE_END.finditer(answer):
        clauses.append((answer[start : m.start()], cited_entries(m[0])))
        start = m.end()
    if answer[start:].strip():
        clauses.append((answer[start:], []))
    return clauses


def _has_provenance(
    claim: dict[str, Any], text: str, clauses: list[tuple[str, list[int]]], entries: dict
) -> bool:
    value, source = claim["value"], claim.get("source") or ""
    if source and answer_contained(text, [source]):
        return True
    cited = {n for clause, numbers in clauses if answer_contained(clause, [value]) for n in numbers}
    return any(n in entries and answer_contained(entries[n], [value]) for n in cited)


def classify_handling(answer: dict[str, Any], claims: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The handling class of one answer (a row of the answers frame) to a question with `claims`."""
    text = answer_text(answer)
    if not text:
        return {"handling": "no answer", "values_named": None, "provenance_named": None}
    if is_declined(text):
        return {"handling": "declined", "values_named": 0, "provenance_named": 0}
    raw = answer["text"]
    context = answer.get("context_text")
    entries = context_entries(context) if isinstance(context, str) else {}
    named = [c for c in claims if answer_contained(text, [c["value"]])]
    clauses = cited_clauses(raw)
    with_provenance = [c for c in named if _has_provenance(c, text, clauses, entries)]
    counts = {"values_named": len(named), "provenance_named": len(with_provenance)}
    if len(named) == len(claims):
        handling = "both_with_provenance" if len(with_provenance) == len(claims) else "both_values"
    elif flags_conflict(text):
        handling = "flagged"
    elif named:
        handling = "silent_pick"
    else:
        handling = "other"
    return {"handling": handling, **counts}


def contradiction_handling(answers: pd.DataFrame, questions: Sequence[Question]) -> pd.DataFrame:
    """One row per answer to a question whose metadata has "claims" (its conflicting values with their
    sources), classified by `classify_handling`; answers to other questions are not in the table.
    """
    claims_of = {q.question_id: q.metadata["claims"] for q in questions if q.metadata.get("claims")}
    rows = []
    for r in answers.to_dict("records"):
        claims = claims_of.get(r["question_id"])
        if claims is None:
            continue
        found = classify_handling(r, claims)
        rows.append(
            {
                "question_id": r["question_id"],
                "method": r["method"],
                "values": len(claims),
                **found,
                "failure": found["handling"] == "silent_pick",
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS).astype({"values_named": "Int64", "provenance_named": "Int64"})
