"""Notebook 10 end to end against the scripted server: it combines the batch's runs of 01, 04 and 09
(by the batch record), states them, builds the amortized cost table, the per-type verdicts, break-even
and power, and with an input notebook missing says what is missing and verdicts on the rest.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import PROJECT_ROOT, cited_answer_reply, endpoint_settings
from traceable import assert_narrated_from_saved_tables

from ragtrial.runner.batch import run_batch

pytestmark = pytest.mark.usefixtures("notebook_kernels")

SECTIONS = {
    "index": {"graph_source": "nlp"},
    "qa": {"methods": ["naive_rag", "hybrid", "graph_walk", "local_search"], "bootstrap_resamples": 200},
    "diagnostics": {
        "methods": ["naive_rag", "hybrid", "graph_walk", "local_search"],
        "questions_per_type": 2,
        "bootstrap_resamples": 200,
    },
    "verdict": {"bootstrap_resamples": 200, "quality_value": {"qa_accuracy": 2000.0}},
}


def run(scripted, tmp_path, only):
    scripted.default_reply = cited_answer_reply
    results = run_batch(
        PROJECT_ROOT / "params" / "default.yaml",
        endpoint_settings(scripted.base_url, tmp_path, **SECTIONS),
        root=PROJECT_ROOT,
        outputs=tmp_path / "out",
        only=only,
        log=lambda _: None,
    )
    for result in results:
        assert result.status == "completed", (result.run_id, result.error)
    return results


def test_notebook_10_combines_the_batch_and_gives_the_verdict(scripted, tmp_path):
    results = run(scripted, tmp_path, ["01_build_index", "04_rag_vs_graphrag_qa", "10_verdict"])
    verdict_run = results[-1].run_dir
    assert_narrated_from_saved_tables(results[0].run_dir)  # 01
    assert_narrated_from_saved_tables(verdict_run)
    read = lambda name: pd.read_parquet(verdict_run / "tables" / f"{name}.parquet")  # noqa: E731
    combined = read("combined_runs")
    assert set(combined["notebook"]) == {"01_build_index", "04_rag_vs_graphrag_qa"}
    assert set(combined["run_id"]) == {r.run_id for r in results[:2]}
    missing = read("missing_inputs")
    assert "09_retrieval_diagnostics" in set(missing["notebook"])
    verdicts = read("verdicts")
    assert set(verdicts["method"]) == {"graph_walk", "local_search"}  # the graph methods only
    assert set(verdicts["baseline"]) == {"hybrid"}
    assert {"all", "single_hop", "multi_hop", "temporal", "contradictory"} <= set(verdicts["question_type"])
    assert set(verdicts["kind"]) == {"answers", "retrieval"}
    costs = read("costs")
    assert {"this evaluation", "setting"} == set(costs["queries_from"])
    index_costs = read("index_costs").set_index("method")
    assert index_costs.at["graph_walk", "seconds"] > index_costs.at["hybrid", "seconds"]
    assert not read("break_even").empty and "power_status" in read("comparisons")
    assert not read("reindex_summary").empty
    report = (verdict_run / "report.html").read_text()
    assert "Missing inputs" in report and "no claim" in report
    index_page = (tmp_path / "out" / "index.html").read_text()
    assert f"{verdict_run.name}/report.html" in index_page


def test_notebook_10_with_diagnostics_reads_the_retrieval_measures(scripted, tmp_path):
    results = run(scripted, tmp_path, ["04_rag_vs_graphrag_qa", "09_retrieval_diagnostics", "10_verdict"])
    comparisons = pd.read_parquet(results[-1].run_dir / "tables" / "comparisons.parquet")
    assert {"qa_accuracy", "entity_recall", "relationship_recall"} <= set(comparisons["measure"])
    runs = pd.read_parquet(results[-1].run_dir / "tables" / "combined_runs.parquet")
    assert set(runs["how"]) == {"this batch"}
