"""Notebook 09 end to end against the scripted server: every table the diagnostics promise, the
oracle's gold-context answers, attribution of every answer, and the summary the regression mode reads.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import PROJECT_ROOT, cited_answer_reply, endpoint_settings, run_default_notebooks
from traceable import assert_narrated_from_saved_tables

from ragtrial.runner.regression import SUMMARY_COLUMNS

pytestmark = pytest.mark.usefixtures("notebook_kernels")


def run_diagnostics(scripted, tmp_path, **sections):
    """Notebook 09 of the default batch against the scripted server, with `sections` merged in."""
    scripted.default_reply = cited_answer_reply
    (result,) = run_default_notebooks(
        endpoint_settings(scripted.base_url, tmp_path, **sections), tmp_path, "09_retrieval_diagnostics"
    )
    return result.run_dir / "tables", result.run_dir


def test_notebook_09_writes_every_diagnostics_table(scripted, tmp_path):
    tables, run_dir = run_diagnostics(
        scripted,
        tmp_path,
        index={"graph_source": "nlp"},
        diagnostics={
            "methods": ["naive_rag", "graph_walk", "local_search"],
            "questions_per_type": 2,
            "bootstrap_resamples": 200,
        },
    )
    read = lambda name: pd.read_parquet(tables / f"{name}.parquet")  # noqa: E731
    answers = read("answers")
    assert set(answers["method"]) == {"naive_rag", "graph_walk", "local_search", "oracle"}
    assert {"retrieved_entity_ids", "retrieved_relation_ids", "element_mapping"} <= set(answers)
    oracle = answers[answers["method"] == "oracle"]
    assert oracle["context_text"].str.contains(r"\(gold_fact\)").all()  # the gold subgraph is shown
    summary = read("diagnostics_summary")
    assert set(SUMMARY_COLUMNS) <= set(summary)
    assert set(summary["category"]) == {"single_hop", "multi_hop", "temporal", "contradictory"}
    metrics = {"entity_recall", "relationship_recall", "grounding", "citation_coverage", "answer_correct"}
    assert set(summary["metric"]) == metrics
    # every answer cites [1], an entry of its context: full coverage wherever a context was shown
    coverage = summary[summary["metric"] == "citation_coverage"]
    assert (coverage["mean"] == 1).all()
    attribution = read("attribution")
    assert len(attribution) == 3 * len(oracle)  # every answer of every method but the oracle
    assert set(attribution["outcome"]) <= {
        "correct",
        "retrieval failure",
        "missed retrieval failure",
        "reasoning failure",
    } | {o for o in attribution["outcome"] if o.startswith("unattributed: ")}
    assert not read("linking_rates").empty and not read("temporal").empty
    contradictions = read("contradictions")
    assert set(contradictions["question_id"]) <= set(oracle["question_id"])
    report = (run_dir / "report.html").read_text()
    assert "Failure attribution" in report and "islands of context" in report.lower()
    assert_narrated_from_saved_tables(run_dir)


def test_notebook_09_on_a_query_log_samples_clusters_and_reports_gold_metrics_unavailable(scripted, tmp_path):
    tables, _ = run_diagnostics(
        scripted,
        tmp_path,
        data={
            "dataset": "query_log",
            "path": str(PROJECT_ROOT / "tests" / "fixtures" / "query_log"),
            "options": {"corpus": "corpus"},
        },
        index={"graph_source": "nlp", "reports": "none"},
        diagnostics={
            "methods": ["naive_rag", "graph_walk"],
            "question_types": ["log"],
            "questions_per_type": None,
            "log_sample_size": 3,
            "bootstrap_resamples": 200,
        },
    )
    clusters = pd.read_parquet(tables / "log_clusters.parquet")
    assert clusters["sampled"].sum() == 3
    summary = pd.read_parquet(tables / "diagnostics_summary.parquet").set_index("metric")
    for metric in ("entity_recall", "relationship_recall", "answer_correct"):
        assert summary.loc[metric, "n"].max() == 0  # no gold: unavailable, not 0
        assert summary.loc[metric, "unavailable"].str.len().min() > 0
    coverage = summary.loc["citation_coverage"].set_index("method")
    assert (coverage.loc[["naive_rag", "graph_walk"], "mean"] == 1).all()  # LLM-free, needs no gold
    # the oracle has no gold context to show: a counted failure, not an answer
    assert coverage.loc["oracle", "unavailable"] == "no answer: 3"
    answers = pd.read_parquet(tables / "answers.parquet")
    assert set(answers.loc[answers["method"] == "oracle", "failure"]) == {"no_context"}
