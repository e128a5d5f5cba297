"""Notebook 10's words: which runs the verdict combined, and per question type, for each graph
method, the verdict generated from its numbers (never a ranking of point estimates: a difference
is stated only under the claim rule, and "no claim" says what this run could have detected);
worded from its saved tables (`findings`: `evaluation.verdict_findings`).
"""

from __future__ import annotations

import math

import pandas as pd

from ragtrial import stats
from ragtrial.evaluation.findings import FINDINGS_TABLE, answered_by_embedded_model, stated_count, statements
from ragtrial.evaluation.run_facts import quoted_name
from ragtrial.evaluation.verdict import Pricing
from ragtrial.evaluation.verdict_findings import (
    LEFT_OUT,
    LEFT_OUT_REASONS_SHOWN,
    LEFT_OUT_REASONS_UNLISTED,
    MORE_VERDICTS,
    PRICE,
    RUNS_SKIPPED,
)
from ragtrial.evaluation.verdict_measures import MEASURES
from ragtrial.report.markdown import escape_markdown, table_cell
from ragtrial.report.narrative.common import embedded_disclaimer
from ragtrial.report.narrative.narration import Narration, SavedTables, saved

UNIT_WORDS = {"tokens": "LLM tokens", "money": "money", "seconds": "seconds", "calls": "calls"}
MEASURED_BY = {
    "gold": "retrieval against gold, no model in the measurement",
    "answer": "the generator's answers",
    "judge": "an LLM judge or extractor",
}


def combined_runs_note(runs: pd.DataFrame, missing: pd.DataFrame, findings: pd.DataFrame) -> str:
    """Exactly which runs the verdict combines, and what it lacks (tables `combined_runs`,
    `missing_inputs`, and the runs skipped counted in `findings`).
    """
    lines = ["**Runs combined** (same data set, model and index):"]
    lines += [
        f"- `{r.notebook}`: run `{r.run_id}` ({r.how}; ended `{r.ended_at}`, commit "
        f"`{str(r.git_commit)[:10]}`)"
        for r in runs.itertuples(index=False)
    ] or ["- none"]
    if len(missing):
        lines.append(
            "**Missing inputs**, so the verdict is restricted to what the runs above measured: "
            + "; ".join(f"`{m.notebook}` ({table_cell(m.reason)})" for m in missing.itertuples(index=False))
            + "."
        )
    if skipped := stated_count(findings, RUNS_SKIPPED):
        lines.append(
            f"{skipped} other run(s) in the outputs folder were not combined (listed in the "
            "`skipped_runs` table with the reason: another data set, model or index, or not completed)."
        )
    return "\n".join(lines)


def _number(value: float) -> str:
    if math.isinf(value):
        return "never"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _cost_clause(row: pd.Series) -> str:
    unit = UNIT_WORDS.get(row["unit"], row["unit"])
    if math.isnan(row["cost_ratio_eval"]):
        return f"(no {unit} cost of the baseline to compare with)"
    return (
        f"at {row['cost_ratio_eval']:.2g}× the {unit} per query including indexing over this evaluation's "
        f"{int(row['eval_queries'])} queries, {row['cost_ratio_max']:.2g}× over {int(row['max_queries']):,}"
    )


def _pay_back_clause(row: pd.Series) -> str:
    unit = UNIT_WORDS.get(row["unit"], row["unit"])
    queries = f"{int(row['max_queries']):,}" if not math.isnan(row["max_queries"]) else "?"
    if not math.isnan(row["pays_back_after"]):
        if math.isinf(row["pays_back_after"]):
            return "it never pays back: at the stated value the gain does not cover its extra answering cost"
        return (
            f"worth it above {_number(row['pays_back_after'])} queries "
            f"[{_number(row['pays_back_low'])}, {_number(row['pays_back_high'])}]"
        )
    if math.isnan(row["cost_per_unit"]):
        return f"set `verdict.quality_value.{row['measure']}` for a break-even"
    if row["cost_per_unit"] <= 0:
        return f"at {queries} queries it costs no more per query than the baseline, so the gain is free"
    return (
        f"each extra unit of {row['measure']} costs {_number(row['cost_per_unit'])} {unit} "
        f"[{_number(row['cost_per_unit_low'])}, {_number(row['cost_per_unit_high'])}] at {queries} queries "
        f"(set `verdict.quality_value.{row['measure']}` for a break-even)"
    )


# The width of a bounded measure's scale: a detectable difference beyond it is no difference at all.
SCALE_WIDTH = {"0-1": 1.0, "0-5": 5.0}


def _power_clause(row: pd.Series) -> str:
    if row["power_status"] != "ok":
        return f"the power analysis could not run ({row['power_status']})"
    needed = f"{int(row['questions_needed_adjusted']):,} questions detect {row['target_difference']:g}"
    enough = "so it had enough" if row["enough_questions"] else "so it had too few"
    width = SCALE_WIDTH.get(MEASURES.entry(row["measure"]).metadata["scale"], math.inf)
    if row["detectable_adjusted"] > width:
        return (
            f"with {int(row['n'])} paired questions this run could detect no difference within the measure's "
            f"range (at the Holm family's level); {needed}, {enough}"
        )
    return (
        f"with {int(row['n'])} paired questions this run could only detect differences above "
        f"{row['detectable_adjusted']:.3g} (at the Holm family's level); {needed}, {enough}"
    )


def _worse_clause(row: pd.Series) -> str:
    """What a supported loss means for the bill, weighed over every measure of the question type:
    "not worth its bill" only when no measure finds it better and it costs at least as much.
    """
    weighed = f"better on none of the {int(row['measures_compared'])} measure(s) compared here"
    if math.isnan(row["cost_ratio_eval"]):
        return f"{weighed}, and no cost to weigh"
    if row["cost_ratio_eval"] >= 1:
        return f"{weighed} and no cheaper: not worth its bill here"
    return f"{weighed} but cheaper, so the saving must be weighed against the loss"


def _mixed_sentence(row: pd.Series, measure: str, interval: str) -> str:
    """A method the claim rule finds better on some measures of the question type and worse on others."""
    lead = (
        "supported"
        if row["supported"]
        else stats.claim_text(row["ci_low"], row["ci_high"], row["p_holm"], "", stats.CLAIM_ALPHA)
    )
    return (
        f"**{row['method']}** against {row['baseline']}: **mixed** under the claim rule, better on "
        f"{int(row['measures_better'])} measure(s) ({row['better_on']}) and worse on "
        f"{int(row['measures_worse'])} ({row['worse_on']}) of the {int(row['measures_compared'])} compared; "
        f"on {measure} {interval} ({lead}). Cost: {_cost_clause(row)}."
    )


def verdict_sentence(row: pd.Series, embedded: bool) -> str:
    """One graph method on one question type, in words, from the verdict row: its lead measure under
    the claim rule, weighed against every other measure of the question type ("mixed" when the claim
    rule finds it better on some and worse on others).
    """
    measure = f"{row['measure']} ({MEASURED_BY[row['measured_by']]})"
    label = ""
    if embedded and row["measured_by"] != "gold":
        label = "*Pipeline check on the embedded model, not a finding:* "
    interval = f"{row['mean_diff']:+.3g} [{row['ci_low']:.3g}, {row['ci_high']:.3g}]"
    if row["measures_better"] and row["measures_worse"]:
        return label + _mixed_sentence(row, measure, interval)
    if row["supported"] and row["mean_diff"] > 0:
        claim = (
            f"**{row['method']}** is better than {row['baseline']} by {interval} on {measure}, "
            f"{_cost_clause(row)}; {_pay_back_clause(row)}."
        )
    elif row["supported"]:
        claim = (
            f"**{row['method']}** is worse than {row['baseline']} by {interval} on {measure}, "
            f"{_cost_clause(row)}; {_worse_clause(row)}."
        )
    else:
        reason = stats.claim_text(row["ci_low"], row["ci_high"], row["p_holm"], "", stats.CLAIM_ALPHA)
        claim = (
            f"**{row['method']}** against {row['baseline']} on {measure}: {interval}; {reason}; "
            f"{_power_clause(row)}. Cost: {_cost_clause(row)}."
        )
    others = f" Other findings: {row['other_findings']}." if row["other_findings"] else ""
    return label + claim + others


def verdict_by_type(verdicts: pd.DataFrame, embedded: bool) -> str:
    """The verdict per question type ("all" first), one sentence per graph method."""
    if verdicts.empty:
        return "No graph method was compared with a baseline: the combined runs hold no measure of one."
    blocks = []
    order = ["all", *sorted(set(verdicts["question_type"]) - {"all"})]
    for question_type in order:
        rows = verdicts[verdicts["question_type"] == question_type]
        if rows.empty:
            continue
        title = "All questions" if question_type == "all" else f"Question type `{question_type}`"
        sentences = [f"- {verdict_sentence(row, embedded)}" for _, row in rows.iterrows()]
        blocks.append(f"#### {title}\n" + "\n".join(sentences))
    if embedded:
        blocks.append(
            embedded_disclaimer("The answers, judgments and claims behind the non-gold measures")
            + " The retrieval measures against gold and the index costs are measurements of this pipeline."
        )
    return "\n\n".join(blocks)


def baseline_note(baselines: pd.DataFrame) -> str:
    """The baseline each comparison used and the rule that chose it."""
    if baselines.empty:
        return "No baseline: no measure was read."
    chosen = baselines.drop_duplicates(["baseline", "rule"])
    parts = [f"`{r.baseline or 'none'}` ({r.rule})" for r in chosen.itertuples(index=False)]
    return (
        "**Baseline rule** (`verdict.baseline_order`, stated before any result is read): "
        + "; ".join(parts)
        + ". Every measure is read in its own table; Holm adjusts across each measure's comparisons."
    )


def measures_note(measures: pd.DataFrame) -> str:
    """Which measures the verdict read, and why the others are absent (table `measures_read`)."""
    read, unread = measures[measures["read"]], measures[~measures["read"]]
    lines = [
        "**Measures read:** "
        + ", ".join(f"`{m}` ({MEASURES.entry(m).description})" for m in read["measure"])
        + "."
    ]
    if len(unread):
        lines.append(
            "**Not read:** "
            + "; ".join(f"`{m}`: {why}" for m, why in zip(unread["measure"], unread["reason"], strict=True))
            + "."
        )
    return "\n".join(lines)


def cost_note(names: pd.DataFrame, findings: pd.DataFrame) -> str:
    """The unit the verdict's ratios and break-even are in (`quoted_names`), and what money covers
    (the prices in `findings`).
    """
    unit = quoted_name(names, "verdict.cost_unit")
    prices = statements(findings, PRICE).set_index("subject")["value"]
    pricing = Pricing(*(prices.get(tokens) for tokens in ("prompt", "completion", "embedding")))
    return (
        f"**Cost unit:** {UNIT_WORDS.get(unit, unit)} (`verdict.cost_unit`). Money: "
        f"{pricing.note()}. Calls, LLM tokens, embedding tokens and seconds are "
        "in the tables whatever the unit; answering costs include calls replayed from the cache (what the "
        "work costs); seconds are the build's wall time and, per query, the mean model time of the "
        "answers paid live."
    )


def left_out_note(counts: pd.DataFrame, findings: pd.DataFrame) -> str:
    """What the comparisons left out and why (a failed answer, no gold, a failed check), counted
    (table `left_out_counts`, the total and the reasons not listed in `findings`).
    """
    left_out = stated_count(findings, LEFT_OUT)
    if not left_out:
        return "**Left out:** no question; every comparison is on every question both methods answered."
    listed = [
        f"`{r.measure}`: {r.questions} × {table_cell(r.reason)}"
        for r in counts.head(LEFT_OUT_REASONS_SHOWN).itertuples(index=False)
    ]
    unlisted = stated_count(findings, LEFT_OUT_REASONS_UNLISTED)
    more = f" (and {unlisted} more reasons in the `left_out` table)" if unlisted else ""
    return f"**Left out:** {left_out} paired question(s), never scored: " + "; ".join(listed) + more + "."


def verdict_headline(verdicts: pd.DataFrame, findings: pd.DataFrame) -> str:
    """The one line of notebook 10 for the index page: the verdict's first sentence (all questions,
    the first graph method), and how many other sentences it has.
    """
    embedded = answered_by_embedded_model(findings)
    if verdicts.empty:
        return verdict_by_type(verdicts, embedded)
    overall = verdicts[verdicts["question_type"] == "all"]
    row = (overall if len(overall) else verdicts).iloc[0]
    more = stated_count(findings, MORE_VERDICTS)
    return verdict_sentence(row, embedded) + (f" ({more} more verdict(s) in the report.)" if more else "")


def real_evidence_sentence(row: pd.Series) -> str:
    """One real-data verdict: the best graph retriever against the strongest plain one, under the
    claim rule, with the graph's bill.
    """
    method, baseline = escape_markdown(row["method"]), escape_markdown(row["baseline"])
    claim = f"{method} retrieves more of the gold evidence than {baseline}"
    if row["mean_diff"] < 0:
        claim = f"{baseline} retrieves more of the gold evidence than {method}"
    interval = f"{row['mean_diff']:+.2f} [{row['ci_low']:+.2f}, {row['ci_high']:+.2f}]"
    bill = (
        f"its {escape_markdown(row['graph'])} graph cost {row['graph_model_calls']} model calls and "
        f"{row['graph_wall_s']:.1f} s to build here"
    )
    if pd.notna(row["published_cost_usd"]):
        bill += f", ${row['published_cost_usd']:.2f} as published"
    return (
        f"{escape_markdown(row['data_set'])}, {escape_markdown(row['question_type'])}, `{row['measure']}`: "
        f"{method} vs {baseline} {interval} over {int(row['n'])} questions: "
        f"{stats.claim_text(row['ci_low'], row['ci_high'], row['p_holm'], claim)}; {bill}."
    )


def real_evidence_text(evidence: pd.DataFrame) -> str:
    """The real-data verdicts (table `real_evidence`: the batch's notebook-13 runs, no model call)."""
    if evidence.empty:
        return ""
    lines = [
        "**Real evidence (LLM-free)**: per real data set and question type, the kit's best graph retriever "
        "against the strongest plain retriever on the lead measure, from this batch's retrieval-benchmark "
        "runs (no model call; these numbers are measurements):"
    ]
    lines += [f"- {real_evidence_sentence(row)}" for _, row in evidence.iterrows()]
    return "\n".join(lines)


def real_evidence_headline(evidence: pd.DataFrame) -> str:
    """The index page's line when the batch has real evidence: each data set's verdict on all questions."""
    overall = evidence[evidence["question_type"] == "all"]
    return "Real evidence (no model call): " + " ".join(
        real_evidence_sentence(r) for _, r in overall.iterrows()
    )


def point_verdict_text(points: pd.DataFrame, embedded: bool) -> str:
    """The verdict of each grid point (table `point_verdicts`); "" without a grid."""
    if points.empty:
        return ""
    blocks = [
        f"### Grid point {escape_markdown(str(point))} (run `{rows['run_id'].iloc[0]}`)\n\n"
        + verdict_by_type(rows.drop(columns=["point", "run_id"]), embedded)
        for point, rows in points.groupby("point", sort=False)
    ]
    return "\n\n**The verdict per grid point** (the sections above read the first point):\n\n" + "\n\n".join(
        blocks
    )


def narrate(tables: SavedTables) -> Narration:
    """The headline and the verdict per question type (tables `verdicts` and `findings`), and with a grid
    each point's (table `point_verdicts`); with real evidence (table `real_evidence`), it comes first and
    is the headline.
    """
    verdicts, findings = saved(tables, "verdicts"), saved(tables, FINDINGS_TABLE)
    embedded = answered_by_embedded_model(findings)
    points = tables.get("point_verdicts")
    by_type = verdict_by_type(verdicts, embedded) + point_verdict_text(
        points if points is not None else pd.DataFrame(), embedded
    )
    evidence = tables.get("real_evidence")
    if evidence is None or evidence.empty:
        return Narration(verdict_headline(verdicts, findings), by_type)
    return Narration(
        real_evidence_headline(evidence),
        real_evidence_text(evidence) + "\n\n**This batch's data set**: " + by_type,
    )
