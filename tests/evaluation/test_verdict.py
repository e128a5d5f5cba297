"""The verdict on scripted result tables with a known true difference and known costs: differences,
intervals, Holm, the baseline rule, amortized costs, break-even and the sentences match hand
computation.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats
from traceable import untraced_numbers

from ragtrial import stats
from ragtrial.config.base import ParamsError
from ragtrial.config.verdict import VerdictSettings
from ragtrial.evaluation.findings import stated
from ragtrial.evaluation.run_facts import quoted_names_table
from ragtrial.evaluation.verdict import (
    Pricing,
    build_verdict,
    compare,
    pair_with_baselines,
    read_answers,
    read_measures,
)
from ragtrial.evaluation.verdict_findings import left_out_counts, measures_read_table, verdict_findings
from ragtrial.evaluation.verdict_measures import MissingTable
from ragtrial.index.costs import COLUMNS
from ragtrial.report.narrative.verdict import (
    combined_runs_note,
    cost_note,
    left_out_note,
    measures_note,
    narrate,
    verdict_by_type,
    verdict_headline,
    verdict_sentence,
)

# Per-question noise that sums to zero within each type, so the true mean difference is exact.
NOISE = np.tile([0.05, -0.05, 0.1, -0.1], 5)


def f1_observations(effect_multi: float = 0.2, effect_single: float = 0.0) -> pd.DataFrame:
    """qa_f1 of hybrid and graph_walk on 20 multi-hop and 20 single-hop questions: graph_walk =
    hybrid + effect + noise.
    """
    rows = []
    for question_type, effect in (("multi_hop", effect_multi), ("single_hop", effect_single)):
        for i in range(20):
            qid = f"{question_type}-{i:02d}"
            base = 0.3 + 0.01 * i
            rows.append((qid, question_type, "hybrid", base))
            rows.append((qid, question_type, "graph_walk", base + effect + NOISE[i]))
            rows.append((qid, question_type, "naive_rag", base - 0.1))
    frame = pd.DataFrame(rows, columns=["question_id", "question_type", "method", "value"])
    return frame.assign(partner="", status="ok", measure="qa_f1")[
        ["measure", "question_id", "question_type", "method", "partner", "value", "status"]
    ]


PARTS = pd.DataFrame(
    [
        # part, origin, calls, live, prompt, completion, embedding tokens, model_s, wall_s
        ("chunks", "", 0, 0, 0, 0, 0, 0.0, 1.0),
        ("chunk_embeddings", "", 2, 2, 0, 0, 1000, 4.0, 4.0),
        ("graph", "nlp", 0, 0, 0, 0, 0, 0.0, 2.0),
        ("graph", "llm", 10, 10, 8000, 2000, 0, 100.0, 101.0),
    ],
    columns=[c for c in COLUMNS if c != "basis"],
).assign(basis="measured")


# One document's re-indexing: its chunk's LLM extraction (1 call, 800 + 200 tokens) and embedding (50).
REINDEX = pd.DataFrame(
    [
        ("chunks", "", 0, 0, 0, 0, 0.0, 0.1),
        ("chunk_embeddings", "", 1, 0, 0, 50, 0.1, 0.1),
        ("graph", "llm", 1, 800, 200, 0, 10.0, 10.0),
    ],
    columns=[
        "part",
        "origin",
        "calls",
        "prompt_tokens",
        "completion_tokens",
        "embedding_tokens",
        "model_s",
        "wall_s",
    ],
)
REINDEX = REINDEX.assign(
    **{
        f"{c}_{s}": REINDEX[c] * (2 if s == "max" else 1)
        for c in REINDEX.columns[2:]
        for s in ("mean", "max")
    }
)


def answers_table(questions: int = 40) -> pd.DataFrame:
    """04's scores: hybrid 1000 + 50 tokens per question, graph_walk 1200 + 50, naive_rag 900 + 50."""
    rows = []
    for method, prompt in (("hybrid", 1000), ("graph_walk", 1200), ("naive_rag", 900)):
        for i in range(questions):
            rows.append(
                {
                    "question_id": f"q{i}",
                    "method": method,
                    "calls": 1,
                    "cached_calls": 0,
                    "prompt_tokens": prompt,
                    "completion_tokens": 50,
                    "latency_s": 2.0,
                }
            )
    return pd.DataFrame(rows)


METHOD_PARTS = {
    ("04_rag_vs_graphrag_qa", "hybrid"): [("chunks", ""), ("chunk_embeddings", "")],
    ("04_rag_vs_graphrag_qa", "naive_rag"): [("chunks", ""), ("chunk_embeddings", "")],
    ("04_rag_vs_graphrag_qa", "graph_walk"): [
        ("chunks", ""),
        ("chunk_embeddings", ""),
        ("graph", "nlp"),
        ("graph", "llm"),
    ],
}


def settings(**values) -> VerdictSettings:
    return VerdictSettings(bootstrap_resamples=500, queries=[1000], **values)


def run(obs: pd.DataFrame, **values):
    return build_verdict(
        {"qa_f1": obs},
        PARTS,
        METHOD_PARTS,
        {"04_rag_vs_graphrag_qa": answers_table()},
        settings(**values),
        Pricing(None, None),
        REINDEX,
    )


def verdict_row(verdict, question_type: str, method: str, kind: str) -> pd.Series:
    rows = verdict.verdicts
    hit = rows[(rows["question_type"] == question_type) & (rows["method"] == method) & (rows["kind"] == kind)]
    assert len(hit) == 1
    return hit.iloc[0]


def test_differences_tests_and_holm_match_hand_computation():
    verdict = run(f1_observations())
    table = verdict.comparisons.set_index(["method", "question_type"])
    multi = table.loc[("graph_walk", "multi_hop")]
    assert multi["baseline"] == "hybrid"  # the rule, not naive_rag (which scores lower)
    assert multi["n"] == 20
    assert multi["mean_diff"] == pytest.approx(0.2)
    assert multi["ci_low"] < 0.2 < multi["ci_high"] and multi["ci_low"] > 0
    diffs = verdict.pairs.query("method == 'graph_walk' and question_type == 'multi_hop'")["diff"]
    assert diffs.to_numpy() == pytest.approx(0.2 + NOISE)
    assert multi["p_value"] == pytest.approx(scipy_stats.wilcoxon(diffs).pvalue)
    assert table.loc[("graph_walk", "all"), "mean_diff"] == pytest.approx(0.1)
    assert table.loc[("graph_walk", "single_hop"), "mean_diff"] == pytest.approx(0.0, abs=1e-12)
    # Holm over the measure's three comparisons (all, multi_hop, single_hop), by hand
    raw = table["p_value"].to_numpy()
    order = np.argsort(raw)
    stepped = np.maximum.accumulate(raw[order] * (3 - np.arange(3)))
    expected = np.empty(3)
    expected[order] = np.minimum(stepped, 1)
    assert table["p_holm"].to_numpy() == pytest.approx(expected)
    assert bool(multi["supported"]) and not bool(table.loc[("graph_walk", "single_hop"), "supported"])


def test_power_columns_come_from_the_observed_paired_differences():
    verdict = run(f1_observations())
    multi = verdict.comparisons.set_index(["method", "question_type"]).loc[("graph_walk", "multi_hop")]
    diffs = 0.2 + NOISE
    sd = float(np.std(diffs, ddof=1))
    assert multi["sd_diff"] == pytest.approx(sd)
    assert multi["detectable"] == pytest.approx(stats.minimum_detectable_difference(sd, 20, 0.05, 0.8))
    assert multi["detectable_adjusted"] == pytest.approx(
        stats.minimum_detectable_difference(sd, 20, 0.05 / 3, 0.8)
    )
    needed = stats.questions_needed(sd, 0.1, 0.05 / 3, 0.8)
    assert multi["questions_needed_adjusted"] == needed
    assert bool(multi["enough_questions"]) == (20 >= needed)


def test_no_variance_gives_a_status_never_a_number():
    obs = f1_observations()
    obs.loc[obs["method"] == "graph_walk", "value"] = (
        obs.loc[obs["method"] == "hybrid", "value"].to_numpy() + 0.1
    )
    row = run(obs).comparisons.set_index(["method", "question_type"]).loc[("graph_walk", "multi_hop")]
    assert "no variance" in row["power_status"]
    assert math.isnan(row["detectable"])


def test_amortized_cost_per_query_includes_the_index_parts_each_method_reads():
    verdict = run(f1_observations())
    costs = verdict.costs[verdict.costs["unit"] == "tokens"].set_index(["method", "queries"])["per_query"]
    # graph_walk: (8000 + 2000) index tokens / N + 1250 per query; hybrid: no LLM index tokens + 1050
    assert costs[("graph_walk", 1000)] == pytest.approx(10_000 / 1000 + 1250)
    assert costs[("graph_walk", 40)] == pytest.approx(10_000 / 40 + 1250)  # this evaluation's 40 questions
    assert costs[("hybrid", 1000)] == pytest.approx(1050)
    index = verdict.index_costs.set_index("method")
    assert index.at["graph_walk", "calls"] == 12 and index.at["hybrid", "embedding_tokens"] == 1000
    assert index.at["graph_walk", "seconds"] == pytest.approx(108.0)
    row = verdict_row(verdict, "multi_hop", "graph_walk", "answers")
    assert row["cost_ratio_max"] == pytest.approx((10 + 1250) / 1050)
    assert row["cost_ratio_eval"] == pytest.approx((250 + 1250) / 1050)


def test_refreshing_one_document_is_charged_to_the_methods_reading_the_parts():
    refresh = run(f1_observations()).refresh_costs.set_index(["method", "per_document"])
    assert (
        refresh.at[("graph_walk", "mean"), "tokens"] == 1000 and refresh.at[("hybrid", "mean"), "tokens"] == 0
    )
    assert (
        refresh.at[("graph_walk", "max"), "calls"] == 4
        and refresh.at[("hybrid", "mean"), "embedding_tokens"] == 50
    )
    assert set(refresh["basis"]) == {"computed from per-chunk costs"}


def test_break_even_with_a_value_per_quality_unit():
    verdict = run(f1_observations(), quality_value={"qa_f1": 5000.0})
    even = verdict.break_even.set_index(["method", "question_type", "queries"])
    row = even.loc[("graph_walk", "multi_hop", 1000)]
    # gain 0.2 x 5000 = 1000 tokens a query, extra answering 200: 800 net; extra index 10000 -> 12.5
    assert row["extra_index"] == pytest.approx(10_000)
    assert row["extra_answer_per_query"] == pytest.approx(200)
    assert row["pays_back_after"] == pytest.approx(12.5)
    comparison = verdict.comparisons.set_index(["method", "question_type"]).loc[("graph_walk", "multi_hop")]
    assert row["pays_back_low"] == pytest.approx(10_000 / (comparison["ci_high"] * 5000 - 200))
    assert row["pays_back_high"] == pytest.approx(10_000 / (comparison["ci_low"] * 5000 - 200))
    # no gain on single-hop: the extra answering cost is never paid back
    assert math.isinf(even.loc[("graph_walk", "single_hop", 1000), "pays_back_after"])
    sentence = verdict_sentence(
        verdict_row(verdict, "multi_hop", "graph_walk", "answers"),
        embedded=False,
    )
    assert "is better than hybrid by +0.2" in sentence and "worth it above 12.5 queries" in sentence


def test_without_a_value_break_even_is_the_cost_per_extra_unit():
    verdict = run(f1_observations())
    row = verdict.break_even.set_index(["method", "question_type", "queries"]).loc[
        ("graph_walk", "multi_hop", 1000)
    ]
    assert row["extra_per_query"] == pytest.approx(10_000 / 1000 + 200)
    assert row["cost_per_unit"] == pytest.approx(210 / 0.2)
    single = verdict.break_even.set_index(["method", "question_type", "queries"]).loc[
        ("graph_walk", "single_hop", 1000)
    ]
    assert math.isnan(single["cost_per_unit"])  # a gain that may be none has no price


def test_money_when_the_llm_is_priced():
    pricing = Pricing(prompt=2.0, completion=8.0)
    verdict = build_verdict(
        {"qa_f1": f1_observations()},
        PARTS,
        METHOD_PARTS,
        {"04_rag_vs_graphrag_qa": answers_table()},
        settings(),
        pricing,
        REINDEX,
    )
    assert verdict.unit == "money"
    index = verdict.index_costs.set_index("method")
    assert index.at["graph_walk", "money"] == pytest.approx((8000 * 2 + 2000 * 8) / 1e6)
    money = verdict.costs[verdict.costs["unit"] == "money"].set_index(["method", "queries"])[
        "answer_per_query"
    ]
    assert money[("hybrid", 1000)] == pytest.approx((1000 * 2 + 50 * 8) / 1e6)
    embedded_priced = Pricing(prompt=2.0, completion=8.0, embedding=0.5)
    assert embedded_priced.money(0, 0, 1000) == pytest.approx(0.0005)
    with pytest.raises(ParamsError, match="verdict.cost_unit"):
        build_verdict(
            {"qa_f1": f1_observations()},
            PARTS,
            METHOD_PARTS,
            {},
            settings(cost_unit="money"),
            Pricing(None, None),
            REINDEX,
        )


def test_the_baseline_rule_is_the_stated_order_and_a_judged_partner():
    obs = f1_observations()
    without_hybrid = obs[obs["method"] != "hybrid"]
    _, _, chosen = pair_with_baselines(without_hybrid, VerdictSettings().baseline_order)
    assert chosen.set_index("method").at["graph_walk", "baseline"] == "naive_rag"
    judged = pd.DataFrame(
        {
            "measure": "judge_score",
            "question_id": ["q1", "q1", "q2", "q2"],
            "question_type": "summary",
            "method": ["local_search", "naive_rag", "local_search", "naive_rag"],
            "partner": ["naive_rag", "local_search", "naive_rag", "local_search"],
            "value": [4.0, 3.0, 3.5, 3.0],
            "status": "ok",
        }
    )
    pairs, _, chosen = pair_with_baselines(judged, VerdictSettings().baseline_order)
    assert chosen["baseline"].tolist() == ["naive_rag"]
    assert pairs["diff"].tolist() == [1.0, 0.5]


def test_left_out_answers_are_counted_with_their_reason():
    obs = f1_observations()
    failed = (obs["method"] == "graph_walk") & (obs["question_id"] == "multi_hop-03")
    obs.loc[failed, ["value", "status"]] = [math.nan, "answer failed: timeout"]
    pairs, left_out, _ = pair_with_baselines(obs, VerdictSettings().baseline_order)
    assert left_out[["question_id", "reason"]].values.tolist() == [
        ["multi_hop-03", "graph_walk: answer failed: timeout"]
    ]
    table = compare(pairs, left_out, settings(), ["multi_hop", "single_hop"]).set_index(
        ["method", "question_type"]
    )
    assert table.loc[("graph_walk", "multi_hop"), "n"] == 19
    assert table.loc[("graph_walk", "multi_hop"), "left_out"] == 1
    assert table.loc[("graph_walk", "all"), "left_out"] == 1


def test_no_claim_says_what_the_run_could_detect():
    obs = f1_observations(effect_multi=0.0)
    verdict = run(obs)
    row = verdict_row(verdict, "multi_hop", "graph_walk", "answers")
    sentence = verdict_sentence(row, embedded=False)
    assert "**no claim**" in sentence and "could only detect differences above" in sentence
    assert "is better" not in sentence and "is worse" not in sentence
    assert "Pipeline check" in verdict_by_type(verdict.verdicts, embedded=True)


def test_missing_inputs_restrict_the_verdict_and_say_why():
    tables = {("04_rag_vs_graphrag_qa", "scores"): None}

    def table(notebook: str, name: str):
        if notebook == "09_retrieval_diagnostics":
            raise FileNotFoundError(f"outputs/09-x/tables/{name}.parquet")
        return tables.get((notebook, name))

    read, unread = read_measures(table, {"09_retrieval_diagnostics"})
    assert read == {}
    assert unread["judge_score"] == "no run of 07_pairwise_method_comparison combined"
    assert "has no table 'per_answer'" in unread["entity_recall"]
    assert read_answers(lambda nb, name: None, {"04_rag_vs_graphrag_qa"}) == {}
    with pytest.raises(MissingTable):
        from ragtrial.evaluation.verdict_measures import observations

        observations("qa_f1", lambda name: None)


def test_unknown_measure_keys_are_refused_by_name():
    with pytest.raises(ParamsError, match=r"verdict.quality_value.*no_such"):
        run(f1_observations(), quality_value={"no_such": 1.0})


def test_a_detectable_difference_beyond_the_scale_is_said_so():
    obs = f1_observations()
    few = obs[obs["question_id"].isin(["multi_hop-00", "multi_hop-01"])]
    sentence = verdict_sentence(verdict_row(run(few), "multi_hop", "graph_walk", "answers"), embedded=False)
    assert "could detect no difference within the measure's range" in sentence


def test_claims_whose_every_extraction_failed_are_statuses_not_an_error():
    from ragtrial.evaluation.verdict_measures import observations

    tables = {
        "claim_metrics": pd.DataFrame(
            columns=["answer_id", "question_id", "method", "metric", "threshold", "measure", "value"]
        ),
        "questions": pd.DataFrame({"question_id": ["q1"], "question_type": ["summary"]}),
        "claim_sets": pd.DataFrame(
            {"answer_id": ["a:q1", "b:q1"], "question_id": "q1", "method": ["a", "b"], "status": "failed"}
        ),
    }
    for measure in ("claims_diversity", "claims_comprehensiveness"):
        frame = observations(measure, tables.get)
        assert set(frame["status"]) == {"claim extraction failed"} and frame["value"].isna().all()


def test_the_headline_is_the_verdict_on_all_questions_and_counts_the_rest():
    verdict = run(f1_observations())
    first = verdict.verdicts[verdict.verdicts["question_type"] == "all"].iloc[0]
    findings = verdict_findings(
        pd.DataFrame(), verdict.left_out, verdict.verdicts, Pricing(None, None), False
    )
    assert stated(findings, "verdicts beyond the headline's")["value"] == len(verdict.verdicts) - 1
    tables = {"verdicts": verdict.verdicts, "findings": findings}
    narration = narrate(tables)
    assert narration.headline == verdict_sentence(first, embedded=False) + (
        f" ({len(verdict.verdicts) - 1} more verdict(s) in the report.)"
    )
    assert narration.findings == verdict_by_type(verdict.verdicts, embedded=False)
    assert "\n" not in narration.headline and len(verdict.verdicts) > 1
    assert untraced_numbers(narration.headline, tables) == []
    none = verdict_findings(
        pd.DataFrame(), verdict.left_out, verdict.verdicts.iloc[:0], Pricing(None, None), False
    )
    assert verdict_headline(verdict.verdicts.iloc[:0], none).startswith("No graph method was compared")


def test_an_interval_without_a_rejecting_test_names_the_saved_level_it_missed():
    verdicts = run(f1_observations()).verdicts.copy()
    verdicts = verdicts.assign(ci_low=0.01, ci_high=0.4, p_holm=0.2, supported=False)
    findings = verdict_findings(pd.DataFrame(), pd.DataFrame(), verdicts, Pricing(None, None), False)
    tables = {"verdicts": verdicts, "findings": findings}
    narration = narrate(tables)
    assert "above 0.05" in narration.findings
    assert untraced_numbers(narration.findings, tables) == []


def test_the_verdict_notes_word_their_tables_alone():
    verdict = run(f1_observations())
    left_out = pd.DataFrame(
        {"measure": ["qa_f1"] * 3 + ["qa_em"], "reason": ["no gold", "no gold", "x", "y"]}
    )
    pricing = Pricing(1.0, 2.0)
    findings = verdict_findings(pd.DataFrame({"run": ["a", "b"]}), left_out, verdict.verdicts, pricing, False)
    counts = left_out_counts(left_out)
    assert counts.values.tolist() == [["qa_f1", "no gold", 2], ["qa_f1", "x", 1], ["qa_em", "y", 1]]
    note = left_out_note(counts, findings)
    assert note.startswith("**Left out:** 4 paired question(s), never scored: `qa_f1`: 2 × no gold;")
    assert "more reasons" not in note
    assert stated(findings, "price per million tokens", "completion")["value"] == 2.0
    names = quoted_names_table({"verdict.cost_unit": "money"})
    assert pricing.note() in cost_note(names, findings) and "**Cost unit:** money" in cost_note(
        names, findings
    )
    runs = pd.DataFrame(columns=["notebook", "run_id", "how", "ended_at", "git_commit"])
    assert "2 other run(s) in the outputs folder were not combined" in combined_runs_note(
        runs, pd.DataFrame(), findings
    )
    measures = measures_read_table(["qa_f1"], {"claims_diversity": "no run of 08"})
    assert measures_note(measures).endswith("**Not read:** `claims_diversity`: no run of 08.")
    assert untraced_numbers(note, {"findings": findings, "left_out_counts": counts}) == []


def _two_measures(f1_effect: float, recall_effect: float):
    """qa_f1 (an answer measure) and qa_recall_at_k (retrieval against gold) of the same multi-hop
    questions, graph_walk off hybrid by the given true differences.
    """
    f1 = f1_observations(effect_multi=f1_effect)
    recall = f1_observations(effect_multi=recall_effect).assign(measure="qa_recall_at_k")
    return build_verdict(
        {"qa_f1": f1, "qa_recall_at_k": recall},
        PARTS,
        METHOD_PARTS,
        {"04_rag_vs_graphrag_qa": answers_table()},
        settings(),
        Pricing(None, None),
        REINDEX,
    )


def test_a_verdict_better_on_one_measure_and_worse_on_another_is_mixed():
    verdict = _two_measures(0.2, -0.2)
    for kind in ("answers", "retrieval"):
        row = verdict_row(verdict, "multi_hop", "graph_walk", kind)
        assert (row["measures_better"], row["measures_worse"], row["measures_compared"]) == (1, 1, 2)
        assert (row["better_on"], row["worse_on"]) == ("qa_f1", "qa_recall_at_k")
        sentence = verdict_sentence(row, embedded=False)
        assert (
            "**graph_walk** against hybrid: **mixed** under the claim rule, better on 1 measure(s) (qa_f1)"
            in (sentence)
        )
        assert "worse on 1 (qa_recall_at_k) of the 2 compared" in sentence
        assert "not worth its bill" not in sentence and "is better than" not in sentence
        assert untraced_numbers(sentence, {"verdicts": verdict.verdicts}) == []


def test_worse_on_every_supported_measure_and_dearer_is_not_worth_its_bill():
    verdict = _two_measures(-0.2, -0.2)
    row = verdict_row(verdict, "multi_hop", "graph_walk", "answers")
    assert row["cost_ratio_eval"] > 1 and (row["measures_better"], row["measures_worse"]) == (0, 2)
    sentence = verdict_sentence(row, embedded=False)
    assert "is worse than hybrid by -0.2" in sentence
    assert (
        "better on none of the 2 measure(s) compared here and no cheaper: not worth its bill here" in sentence
    )
    cheaper_row = row.copy()
    cheaper_row["cost_ratio_eval"] = 0.5
    cheaper = verdict_sentence(cheaper_row, embedded=False)
    assert "but cheaper, so the saving must be weighed against the loss" in cheaper
    assert "not worth its bill" not in cheaper
