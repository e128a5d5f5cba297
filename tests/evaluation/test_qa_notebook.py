"""Notebook 04 end to end against the scripted server: the tables and findings that say how often
retrieval fell back, which graph each method walked, and the paired EM test of seed 001.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import endpoint_settings, run_default_notebooks
from traceable import assert_narrated_from_saved_tables

pytestmark = pytest.mark.usefixtures("notebook_kernels")


def test_qa_tables_pair_em_count_fallbacks_and_name_the_graph_walked(scripted, tmp_path):
    scripted.default_reply = lambda body: "Alvor"
    overrides = endpoint_settings(
        scripted.base_url,
        tmp_path,
        index={"graph_source": "nlp"},
        retrieval={"graph_fallback": "none"},
        qa={
            "methods": ["hybrid", "graph_walk", "graph_hybrid"],
            "baseline": "hybrid",
            "questions_per_type": 2,
            "bootstrap_resamples": 200,
        },
    )
    (result,) = run_default_notebooks(overrides, tmp_path, "04_rag_vs_graphrag_qa")
    tables = result.run_dir / "tables"
    summary = pd.read_parquet(tables / "summary.parquet").set_index("method")
    fallbacks = pd.read_parquet(tables / "fallbacks.parquet").set_index("method")
    paired = pd.read_parquet(tables / "paired_vs_baseline.parquet")
    assert summary.loc["graph_walk", "graph"] == "nlp" and summary.loc["hybrid", "graph"] == ""
    assert summary.loc["graph_hybrid", "graph"] == "nlp"
    assert list(summary["fallback_rate"]) == list(fallbacks.loc[summary.index, "fallback_rate"])
    assert fallbacks.loc["hybrid", "fallbacks"] == 0
    # seed 001's headline: EM, graph + hybrid against hybrid, with its interval and wins / losses
    em = paired[(paired["metric"] == "em") & (paired["method"] == "graph_hybrid")]
    assert set(em["subset"]) == {"all", "no fallback"} and (em["baseline"] == "hybrid").all()
    assert {"ci_low", "ci_high", "wins", "losses", "method_fallback_rate", "baseline_fallback_rate"} <= set(
        em
    )
    assert (em["method_fallback_rate"] == fallbacks.loc["graph_hybrid", "fallback_rate"]).all()
    report = (result.run_dir / "report.html").read_text()
    assert "retrieval.graph_fallback = none" in report and "fell back" in report
    # seed 003: the gold answers looked up in the index's graph, the published shares beside them
    coverage = pd.read_parquet(tables / "answer_entities_in_kg.parquet").set_index(["graph", "question_type"])
    links = pd.read_parquet(tables / "answer_entity_links.parquet")
    entity_answers = links[links["answer_kind"] == "entity"]
    found = entity_answers["in_kg"].isin(["exact", "embedding"])
    assert coverage.loc[("nlp", "all"), "answer_entities"] == len(entity_answers) > 0
    assert coverage.loc[("nlp", "all"), "in_kg_exact"] == (entity_answers["in_kg"] == "exact").sum()
    assert coverage.loc[("nlp", "all"), "not_in_kg"] == (~found).sum()
    assert "Answer entities in the knowledge graph" in report and "65.8% on HotPotQA" in report
    assert_narrated_from_saved_tables(result.run_dir)
