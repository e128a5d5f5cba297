"""Notebook 09's findings and narrative from hand-built tables: by category, indexing failures first,
methods under threshold, islands of context, attribution with the seed's advice, temporal and
contradiction handling; the narrative words the saved tables alone.
"""

from __future__ import annotations

import pandas as pd

from ragtrial.evaluation.diagnostics_findings import (
    contradiction_findings,
    diagnostics_findings,
    island_findings,
    pair_subject,
    temporal_findings,
)
from ragtrial.evaluation.findings import findings_table, stated
from ragtrial.report.narrative.diagnostics import (
    contradiction_sentences,
    island_sentences,
    narrate,
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
        "time_filtered": pd.array([None, None, None], dtype="Int64"),
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
    (island,) = island_findings(SUMMARY)
    assert (island.subject, island.value) == (pair_subject("multi_hop", "naive_rag"), 0.3)
    (sentence,) = island_sentences(SUMMARY, findings_table([island]))
    assert "naive_rag: entity recall 0.90 but relationship recall 0.30" in sentence
    assert "islands of context" in sentence


def test_temporal_sentences_count_determined_answers_and_retrieval_origin():
    found = findings_table(temporal_findings(TEMPORAL, time_filter=False))
    assert stated(found, "answer_window_undetermined", "naive_rag")["value"] == 1
    assert stated(found, "wrong_time_from_retrieval", "naive_rag")["value"] == 1
    lines = temporal_sentences(found)
    assert "does not filter" in lines[0]
    assert "answer in the window 1 of 2 (1 undetermined)" in lines[1]
    assert "1 of 1 wrong-time answers had out-of-window context" in lines[1]
    assert temporal_sentences(findings_table(temporal_findings(TEMPORAL.iloc[:0], True))) == [
        "No question has a time window."
    ]


def test_temporal_sentences_say_per_method_whether_the_window_filtered_it():
    """Seed 004: "filter during retrieval". A filtered method says in how many answers and what it
    dropped; global search and passages say why they are not filtered.
    """
    temporal = pd.DataFrame(
        {
            "method": ["graph_walk", "graph_walk", "global_search", "naive_rag"],
            "time_filtered": pd.array([2, 0, None, None], dtype="Int64"),
            "answer_respects": [True, True, True, True],
            "subgraph_respects": [True, True, None, None],
        }
    )
    lines = temporal_sentences(findings_table(temporal_findings(temporal, time_filter=True)))
    assert "where a method can be filtered" in lines[0]
    assert "graph_walk: filtered by the window in 2 of 2 answers (2 relations and claims dropped)" in lines[1]
    assert (
        "global_search: not filtered by the window (community reports summarise relations of every"
        in lines[2]
    )
    assert "naive_rag: not filtered by the window (passages are never filtered)" in lines[3]
    off = temporal_sentences(findings_table(temporal_findings(temporal, time_filter=False)))
    assert "is off" in off[0] and not any("filtered by the window" in line for line in off)


def test_contradiction_sentences_name_silent_picks_as_failures():
    found = findings_table(contradiction_findings(CONTRADICTIONS))
    assert stated(found, "silent_picks", "hybrid")["value"] == 1
    (line,) = contradiction_sentences(found)
    assert "silent pick 1" in line and "1 silent picks: the seed's failure" in line


def saved_tables(model_retrieval: list[str]) -> dict[str, pd.DataFrame]:
    """What notebook 09 saves, as its narrative reads it back."""
    findings = diagnostics_findings(
        SUMMARY, SHARES, LINKING, TEMPORAL, CONTRADICTIONS, False, model_retrieval, True
    )
    return {
        "diagnostics_summary": SUMMARY,
        "attribution_shares": SHARES,
        "linking_rates": LINKING,
        "findings": findings,
    }


def test_findings_put_indexing_first_and_advise_fixing_retrieval():
    tables = saved_tables(["global_search"])
    found = tables["findings"]
    assert stated(found, "not_indexed", pair_subject("multi_hop", "entity"))["value"] == 2
    assert stated(found, "most_common_failure", "retrieval failure")["value"] == 3
    assert stated(found, "means_below_threshold")["value"] == 1
    text = narrate(tables).findings
    assert text.index("Indexing") < text.index("Under the seed's starting thresholds") < text.index("Islands")
    assert "2 of 10 gold entities are not in the index" in text
    assert "fix retrieval (ingestion, traversal depth, query expansion) before tuning prompts" in text
    assert "measured without a model call for graph_walk, naive_rag." in text
    assert "counts as retrieved only the entities its text names" in text  # how a community counts
    assert "not research findings" in text
    with_model = narrate(saved_tables(["naive_rag"])).findings
    assert "for naive_rag the context itself came through model calls" in with_model
    assert narrate(tables).headline == (
        "1 of 4 measured (method, category, metric) means are under the seed's starting thresholds; the most "
        "common failure is the retrieval failure (3 of 4 attributed answers)."
    )
