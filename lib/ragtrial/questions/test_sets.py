"""Which of seed 004's diagnostics a question set supports, from the gold its questions carry.

A metric needs its gold: entity recall needs gold entities, relationship recall gold edges, answer
correctness key facts (judge) or gold answers (string match), temporal correctness validity windows,
contradiction handling conflicting claims; grounding and citation coverage need none (they compare
the answer with the retrieved context). A metric without its gold is unavailable, never 0.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from ragtrial.records import Question

# gold column -> whether a question carries that gold
GOLD: dict[str, Callable[[Question], bool]] = {
    "answers": lambda q: bool(q.answers),
    "gold_docs": lambda q: bool(q.gold_doc_ids),
    "gold_entities": lambda q: bool(q.gold_entities),
    "gold_edges": lambda q: bool(q.gold_edges),
    "key_facts": lambda q: bool(q.key_facts),
    "validity": lambda q: any(e.valid_from is not None for e in q.gold_edges),
    "conflicts": lambda q: len(q.metadata.get("claims") or []) >= 2,
}
# metric -> the gold column it needs (None: needs no gold)
METRIC_GOLD: dict[str, str | None] = {
    "document_recall": "gold_docs",
    "entity_recall": "gold_entities",
    "relationship_recall": "gold_edges",
    "correctness_key_facts": "key_facts",
    "correctness_answers": "answers",
    "temporal_correctness": "validity",
    "contradiction_handling": "conflicts",
    "grounding": None,
    "citation_coverage": None,
}


def metric_support(questions: list[Question]) -> pd.DataFrame:
    """Per question type (then "all"): how many questions carry each kind of gold, and the metrics
    computable on at least one of them.

    Columns: question_type, questions, then one count per GOLD key (answers, gold_docs,
    gold_entities, gold_edges, key_facts, validity, conflicts), then metrics (names from METRIC_GOLD).
    """
    groups: dict[str, list[Question]] = {}
    for q in questions:
        groups.setdefault(q.question_type or "untyped", []).append(q)
    rows = []
    for qtype, group in [*sorted(groups.items()), ("all", questions)]:
        counts = {name: sum(has(q) for q in group) for name, has in GOLD.items()}
        metrics = [m for m, gold in METRIC_GOLD.items() if gold is None or counts[gold]]
        rows.append({"question_type": qtype, "questions": len(group), **counts, "metrics": metrics})
    return pd.DataFrame(rows, columns=["question_type", "questions", *GOLD, "metrics"])
