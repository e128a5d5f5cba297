"""Notebook 10's real evidence: per notebook-13 run of its batch and question type, the best graph
retriever against the strongest plain one with the graph's bill, worded first and as the headline.
"""

from __future__ import annotations

import pandas as pd
from traceable import untraced_numbers

from ragtrial.evaluation.retrieval_benchmark import ALL_QUESTIONS, WITHOUT_FALLBACKS, real_evidence
from ragtrial.report.narrative.verdict import narrate

COLUMNS = ["variant", "group", "question_type", "measure", "method", "graph", "baseline", "n", "mean_diff"]
COLUMNS += ["ci_low", "ci_high", "wins", "losses", "test", "p_value", "p_holm", "supported", "status"]


def _row(variant, qtype, method, graph, diff, low, high, p, supported, measure="recall@5"):
    return [
        variant,
        "kit",
        qtype,
        measure,
        method,
        graph,
        "vector",
        100,
        diff,
        low,
        high,
        1,
        1,
        "t",
        p,
        p,
        supported,
        "ok",
    ]


def _tables() -> dict[str, pd.DataFrame]:
    comparisons = pd.DataFrame(
        [
            _row(ALL_QUESTIONS, "all", "hipporag:import", True, 0.07, 0.02, 0.12, 0.004, True),
            _row(ALL_QUESTIONS, "all", "graph_walk:nlp", True, -0.3, -0.4, -0.2, 0.001, True),
            _row(ALL_QUESTIONS, "all", "bm25", False, 0.2, 0.1, 0.3, 0.001, True),  # plain: never the pick
            _row(WITHOUT_FALLBACKS, "all", "graph_walk:nlp", True, 0.5, 0.4, 0.6, 0.001, True),
            _row(ALL_QUESTIONS, "2hop", "graph_walk:nlp", True, -0.01, -0.05, 0.03, 0.6, False),
            _row(ALL_QUESTIONS, "all", "hipporag:import", True, 0.9, 0.8, 1.0, 0.001, True, "mrr@10"),
        ],
        columns=COLUMNS,
    )
    baselines = pd.DataFrame([{"group": "kit", "measure": "recall@5", "baseline": "vector", "rule": "r"}])
    bills = pd.DataFrame(
        [
            {
                "graph": "nlp",
                "model_calls": 0,
                "wall_s": 4.5,
                "passages_wall_s": 35.0,
                "published_cost_usd": float("nan"),
                "published_cost_source": "",
            },
            {
                "graph": "import",
                "model_calls": 0,
                "wall_s": 2.4,
                "passages_wall_s": 0.3,
                "published_cost_usd": 12.5,
                "published_cost_source": "approx_total_cost in f.json",
            },
        ]
    )
    return {"baselines": baselines, "comparisons": comparisons, "graph_bills": bills}


def test_the_best_graph_retriever_per_type_on_the_lead_measure_with_its_bill():
    evidence = real_evidence([("13-a", "musique (m)", _tables())])
    assert evidence[["question_type", "method", "graph"]].values.tolist() == [
        ["all", "hipporag:import", "import"],  # not bm25 (plain), not the without-fallbacks variant
        ["2hop", "graph_walk:nlp", "nlp"],
    ]
    first = evidence.iloc[0]
    assert (first["mean_diff"], first["graph_wall_s"], first["published_cost_usd"]) == (0.07, 2.4, 12.5)


def test_the_verdict_leads_with_the_real_evidence_and_words_only_its_tables():
    evidence = real_evidence([("13-a", "musique (m)", _tables())])
    verdicts = pd.DataFrame(columns=["question_type"])
    findings = pd.DataFrame(
        [
            {
                "statement": "embedded_model",
                "subject": "",
                "figure": "f",
                "value": 1.0,
                "ci_low": None,
                "ci_high": None,
                "source": "run.json",
            }
        ]
    )
    tables = {"verdicts": verdicts, "findings": findings, "real_evidence": evidence}
    narration = narrate(tables)
    assert narration.headline.startswith("Real evidence (no model call): musique \\(m\\), all, `recall@5`:")
    assert "hipporag\\:import retrieves more of the gold evidence than vector" in narration.headline
    assert "$12.50 as published" in narration.headline
    assert narration.findings.index("**Real evidence (LLM-free)**") < narration.findings.index("This batch")
    assert untraced_numbers(narration.headline + narration.findings, tables) == []
    without = narrate({"verdicts": verdicts, "findings": findings})
    assert "Real evidence" not in without.headline + without.findings
