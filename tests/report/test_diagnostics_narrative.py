"""Notebook 09's narrative from hand-built tables: by category, indexing failures first, methods under
threshold, islands of context, attribution with the seed's advice, temporal and contradiction handling.
"""

from __future__ import annotations

import pandas as pd

from ragtrial.report.narrative.diagnostics import (
    contradiction_sentences,
    diagnostics_findings,
    island_sentences,
    temporal_sentences,
)


def summary_rows(method: str, category: str, entity: float, relation: float) -> list[dict]:
    return [
        {"method": method, "category": category, "metric": "entity_recall", "n": 4, "mean": entity,
         "ci_low": entity, "ci_high": entity, "threshold": 0.7, "below_threshold": entity < 0.7},
        {"method": method, "category": category, "metric": "relationship_recall", "n": 4, "mean": relation,
         "ci_low": relation, "ci_high": relation, "threshold": 0.8, "below_threshold": relation < 0.8},
    ]  # fmt: skip


SUMMARY = pd.DataFrame(
    summary_rows("graph_walk", "multi_hop", 0.9, 0.9) + summary_rows("naive_rag", "multi_hop", 0.9, 0.3)
)
LINKING = pd.DataFrame(
    [{"category": "multi_hop", "kind": "entity", "gold": 10, "indexed": 8, "linking_rate": 0.8}]
)
OUTCOMES = [
    ("correct", 1),
    ("retrieval failure", 3),
    ("missed retrieval failure", 0),
    ("reasoning failure", 0),
]
SHARES = pd.DataFrame(
    [
        {"method": "naive_rag", "category": "multi_hop", "outcome": o, "answers": n, "attributed": 4}
        for o, n in OUTCOMES
    ]
).assign(unattributed=0)
TEMPORAL = pd.DataFrame(
    {
        "method": ["naive_rag", "naive_rag", "naive_rag"],
        "answer_respects": [True, False, None],
        "subgraph_respects": [True, False, None],
    }
)
CONTRADICTIONS = pd.DataFrame(
    {
        "method": ["hybrid", "hybrid"],
        "handling": ["silent_pick", "both_with_provenance"],
        "failure": [True, False],
    }
)


def test_islands_are_high_entity_low_relationship_recall():
    (sentence,) = island_sentences(SUMMARY)
    assert "naive_rag" in sentence and "islands of context" in sentence


def test_temporal_sentences_count_determined_answers_and_retrieval_origin():
    lines = temporal_sentences(TEMPORAL, time_filter=False)
    assert "does not filter" in lines[0]
    assert "answer in the window 1 of 2 (1 undetermined)" in lines[1]
    assert "1 of 1 wrong-time answers had out-of-window context" in lines[1]


def test_contradiction_sentences_name_silent_picks_as_failures():
    (line,) = contradiction_sentences(CONTRADICTIONS)
    assert "silent pick 1" in line and "1 silent picks: the seed's failure" in line


def test_findings_put_indexing_first_and_advise_fixing_retrieval():
    text = diagnostics_findings(
        SUMMARY, SHARES, LINKING, TEMPORAL, CONTRADICTIONS, False, ["global_search"], True
    )
    assert text.index("Indexing") < text.index("Under the seed's starting thresholds") < text.index("Islands")
    assert "2 of 10 gold entities are not in the index" in text
    assert "fix retrieval (ingestion, traversal depth, query expansion) before tuning prompts" in text
    assert "for global_search the context itself came through model calls" in text
    assert "not research findings" in text
