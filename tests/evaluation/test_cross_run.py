"""Seed 001's cross-setting comparisons ("[0, 12] points over graph + hybrid without the cap"; 1 vs 2
hops): the same method in two runs of a batch, paired on the same questions, per measure, with the
batch's earlier one-setting neighbour found from the runs' records.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ragtrial.evaluation.cross_run import paired_across_runs
from ragtrial.report.narrative.tasks import variation_lines
from ragtrial.runner.combined_runs import batch_variations, paired_with_variations

QUESTIONS = [f"q{i}" for i in range(10)]
NOTEBOOK = "04_rag_vs_graphrag_qa"


def scores(em: dict[str, list[float]], f1: dict[str, list[float]] | None = None) -> pd.DataFrame:
    """A per-question score table as notebook 04 saves it (one row per question x method)."""
    rows = []
    for method, values in em.items():
        for i, (question, value) in enumerate(zip(QUESTIONS, values, strict=True)):
            f1_value = (f1 or em)[method][i]
            failed = np.isnan(value)
            rows.append(
                {
                    "question_id": question,
                    "method": method,
                    "failure": "model error" if failed else "",
                    "em": value,
                    "f1": f1_value,
                    "recall": np.nan if method == "closed_book" else 0.5,
                }
            )
    return pd.DataFrame(rows)


HEADLINE = scores(
    {
        "closed_book": [0, 1, 0, 0, 0, 0, 0, 0, 0, 0],
        "graph_hybrid": [1, 0, 0, 1, 0, 0, 0, 1, 0, 0],
    }
)
# the hub cap: graph_hybrid right on six more questions, wrong on one it had; q9's answer failed
HUB_CAP = scores(
    {
        "closed_book": [0, 1, 0, 0, 0, 0, 0, 0, 0, 0],
        "graph_hybrid": [1, 1, 1, 0, 1, 1, 1, 1, 1, np.nan],
    }
)


def test_the_varied_run_is_paired_with_the_reference_per_method_on_the_questions_both_answered():
    table = paired_across_runs({"headline": HEADLINE}, HUB_CAP, ["em", "f1", "recall"], 500, seed=1)
    row = table[(table["method"] == "graph_hybrid") & (table["metric"] == "em")].iloc[0]
    assert row["n"] == 9  # q9 failed in the varied run: left out, not scored 0
    assert row["wins"] == 6 and row["losses"] == 1
    assert row["mean_diff"] == pytest.approx(5 / 9)
    assert row["reference_mean"] == pytest.approx(3 / 9) and row["varied_mean"] == pytest.approx(8 / 9)
    assert row["ci_low"] <= row["mean_diff"] <= row["ci_high"] and row["ci_high"] > 0
    assert row["test"] == "exact binomial"  # McNemar on 0/1 EM; F1 gets Wilcoxon
    assert table.loc[table["metric"] == "f1", "test"].str.startswith("wilcoxon").all()
    unchanged = table[(table["method"] == "closed_book") & (table["metric"] == "em")].iloc[0]
    assert (unchanged["n"], unchanged["mean_diff"], unchanged["p_value"]) == (10, 0.0, 1.0)
    # closed book shows no passages: it has no recall row
    assert set(table.loc[table["metric"] == "recall", "method"]) == {"graph_hybrid"}
    # Holm across the measure's rows; the claim rule needs the interval and the adjusted test
    em = table[table["metric"] == "em"]
    assert (em["p_holm"] >= em["p_value"]).all()
    assert row["supported"] == (row["ci_low"] > 0 and row["p_holm"] < 0.05)


def test_runs_that_asked_other_questions_are_refused():
    other = HUB_CAP[HUB_CAP["question_id"] != "q0"]
    with pytest.raises(ValueError, match="1 only in the reference run, 0 only in the varied run"):
        paired_across_runs({"headline": HEADLINE}, other, ["em"])


def record(outputs, run_id, settings, batch, status="completed", label=""):
    run_dir = outputs / run_id
    (run_dir / "tables").mkdir(parents=True)
    notebook = run_id.rsplit("-", 1)[0]
    body = {"run_id": run_id, "notebook": notebook, "label": label, "status": status}
    body |= {"settings": settings, "batch": {"file": "params/x.yaml", "run_ids": batch}}
    (run_dir / "run.json").write_text(json.dumps(body))
    return run_dir


def test_a_batch_run_is_compared_with_its_earlier_one_setting_neighbours_only(tmp_path):
    base = {"retrieval": {"hops": 2, "k": 5, "hub_degree_cap": None}, "qa": {"seed": 0}}
    hub = {"retrieval": {"hops": 2, "k": 5, "hub_degree_cap": 20}, "qa": {"seed": 0}}
    two_off = {"retrieval": {"hops": 1, "k": 8, "hub_degree_cap": None}, "qa": {"seed": 0}}
    running = {"retrieval": {"hops": 1, "k": 5, "hub_degree_cap": 20}, "qa": {"seed": 0}}
    batch = [f"{NOTEBOOK}-a", f"{NOTEBOOK}-b", "10_verdict-c", f"{NOTEBOOK}-d", f"{NOTEBOOK}-e"]
    headline = record(tmp_path, batch[0], base, batch, label="headline")
    HEADLINE.to_parquet(headline / "tables" / "scores.parquet")
    record(tmp_path, batch[1], two_off, batch, label="1 hop, 8 passages")
    record(tmp_path, batch[2], base, batch)
    own = record(tmp_path, batch[4], hub, batch, status="running", label="hub cap 20")
    record(tmp_path, batch[3], running, batch, status="running", label="1 hop, hub cap")

    variations, runs = batch_variations(tmp_path, own)
    assert [(v.run_id, v.setting, v.reference_value, v.value) for v in variations] == [
        (batch[0], "retrieval.hub_degree_cap", None, 20)
    ]
    reasons = runs.set_index("run_id")["reason"]
    assert list(reasons.index) == [batch[0], batch[1], batch[3]]  # its notebook's earlier runs only
    assert reasons[batch[1]] == "differs in 3 settings, not one"
    assert reasons[batch[3]] == "status running, not completed"

    table, runs = paired_with_variations(variations, runs, HUB_CAP, ["em"], 200, 0)
    assert set(table["reference"]) == {batch[0]} and set(table["setting"]) == {"retrieval.hub_degree_cap"}
    assert (table["reference_value"].iloc[0], table["value"].iloc[0]) == ("null", "20")
    assert runs.set_index("run_id").loc[batch[0], "compared"]

    # a neighbour that asked other questions is listed as not compared, with why
    HEADLINE[HEADLINE["question_id"] != "q0"].to_parquet(headline / "tables" / "scores.parquet")
    fresh = batch_variations(tmp_path, own)[1]
    table, runs = paired_with_variations(variations, fresh, HUB_CAP, ["em"], 200, 0)
    assert table.empty
    refused = runs.set_index("run_id").loc[batch[0]]
    assert not refused["compared"] and "asked different questions" in refused["reason"]


def test_the_report_words_each_changed_method_under_the_claim_rule(tmp_path):
    table = paired_across_runs({"run-a": HEADLINE}, HUB_CAP, ["em"], 500, seed=1).assign(
        reference_label="headline", setting="retrieval.hub_degree_cap", reference_value="null", value="20"
    )
    runs = pd.DataFrame([{"run_id": "run-z", "compared": False, "reason": "status failed, not completed"}])
    text = variation_lines(table, runs, ["em"])
    assert "differs only in `retrieval.hub_degree_cap` (`null` there, `20` here)" in text
    assert "**graph_hybrid** on em: +0.56" in text and "6 better, 1 worse" in text
    assert "Scored the same on every question in both runs: closed_book." in text
    assert "Not compared with the batch's run `run-z`" in text
    # the claim follows the numbers: with the interval through zero there is no claim
    no_claim = table.assign(ci_low=-0.1)
    assert "no claim" in variation_lines(no_claim, runs.iloc[:0], ["em"])
    supported = table.assign(ci_low=0.2, ci_high=0.8, p_holm=0.01)
    assert "graph_hybrid did better with `retrieval.hub_degree_cap` `20`" in variation_lines(
        supported, runs.iloc[:0], ["em"]
    )
