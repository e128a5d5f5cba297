"""The narratives of notebooks 04 (question answering) and 05 (summarization), worded from their
saved tables alone: the summary, the paired comparisons with the baseline (with the one claim rule,
`ragtrial.stats.claim_text`: the interval excludes zero and the adjusted test rejects, otherwise
"no claim"), complementarity, fallbacks, the `setup` table and the `findings` table
(`evaluation.task_findings`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ragtrial.evaluation.answer_metrics import reported_metrics
from ragtrial.evaluation.findings import answered_by_embedded_model, stated, statements
from ragtrial.evaluation.task_findings import on_all_questions
from ragtrial.report.narrative.answer_entities import answer_entities_paragraph
from ragtrial.report.narrative.common import embedded_disclaimer, failure_sentence
from ragtrial.report.narrative.narration import Narration, SavedTables, saved
from ragtrial.stats import claim_supported, claim_text

QA_QUALITY, SUMMARY_QUALITY = "accuracy", "rouge2_f"


def narrate_qa(tables: SavedTables) -> Narration:
    """Notebook 04: accuracy, EM stated beside it, supporting-passage recall@k, and how the method
    selection routed the questions.
    """
    narration = task_narration(tables, "qa", QA_QUALITY)
    k = int(saved(tables, "setup")["k"].iloc[0])
    stated = [QA_QUALITY, *(m for m in reported_metrics("qa", "stated", k) if m != QA_QUALITY)]
    across = variation_lines(
        tables.get("paired_across_runs", pd.DataFrame()), tables.get("variations", pd.DataFrame()), stated
    )
    entities = answer_entities_paragraph(tables)
    return Narration(
        narration.headline,
        narration.findings + route_line(tables) + (f"\n\n{entities}" if entities else "") + across,
    )


def variation_lines(across: pd.DataFrame, variations: pd.DataFrame, metrics: Sequence[str]) -> str:
    """The run against each earlier run of its batch that differs in one setting (the saved
    `paired_across_runs` and `variations` tables of `runner.combined_runs`), on `metrics`: one sentence
    per method whose answers changed, under the claim rule; the methods identical on every question in
    one line; a one-setting neighbour that could not be compared, with why ("" when there is none).
    """
    lines = []
    for reference, rows in across.groupby("reference", sort=False) if not across.empty else ():
        first = rows.iloc[0]
        lines.append(
            f"\n\nAgainst the batch's run `{reference}` ({first['reference_label']}), which differs only in "
            f"`{first['setting']}` (`{first['reference_value']}` there, `{first['value']}` here), each "
            "method against itself on the same questions (this run minus that one):\n"
        )
        shown = rows[rows["metric"].isin(metrics)]
        unchanged = shown.groupby("method", sort=False).apply(
            lambda m: bool(((m["wins"] == 0) & (m["losses"] == 0)).all()), include_groups=False
        )
        changed = shown[~shown["method"].map(unchanged)]
        lines += [
            f"\n- **{r.method}** on {r.metric}: {_interval(r.mean_diff, r.ci_low, r.ci_high)} over {r.n} "
            f"questions both answered ({r.wins} better, {r.losses} worse; {r.test} p={r.p_value:.3g}, "
            f"Holm {r.p_holm:.3g}): "
            + claim_text(
                r.ci_low,
                r.ci_high,
                r.p_holm,
                f"the interval excludes zero and the Holm-adjusted test rejects, so {r.method} did "
                f"{'better' if r.mean_diff > 0 else 'worse'} with `{first['setting']}` "
                f"`{first['value']}` on these questions",
            )
            + "."
            for r in changed.itertuples(index=False)
        ]
        if same := [m for m, is_same in unchanged.items() if is_same]:
            lines.append(f"\n- Scored the same on every question in both runs: {', '.join(same)}.")
    if not variations.empty:
        blocked = variations[~variations["compared"] & ~variations["reason"].str.startswith("differs in")]
        lines += [
            f"\n\nNot compared with the batch's run `{r.run_id}`: `{r.reason}`."
            for r in blocked.itertuples(index=False)
        ]
    return "".join(lines)


def narrate_summarization(tables: SavedTables) -> Narration:
    """Notebook 05: ROUGE-2 F and supporting-passage recall@k."""
    return task_narration(tables, "summarization", SUMMARY_QUALITY)


def task_narration(tables: SavedTables, task: str, quality: str) -> Narration:
    summary, paired, findings = (
        saved(tables, "summary"),
        saved(tables, "paired_vs_baseline"),
        saved(tables, "findings"),
    )
    k = int(saved(tables, "setup")["k"].iloc[0])
    text = findings_text(
        summary,
        paired,
        tables.get("complementarity", pd.DataFrame()),
        saved(tables, "fallbacks"),
        findings,
        quality=quality,
        recall=f"recall@{k}",
        also=[m for m in reported_metrics(task, "stated", k) if m != quality],
    )
    return Narration(findings_headline(summary, paired, findings, quality), text)


def route_line(tables: SavedTables) -> str:
    """How the method selection routed the questions, and where each route goes (none: "")."""
    routes = statements(saved(tables, "findings"), "routed")
    if routes.empty:
        return ""
    counts = dict(zip(routes["subject"], routes["value"].astype(int), strict=True))
    setup = saved(tables, "setup")
    targets = setup.loc[setup["routes"] != "", "routes"].iloc[0]
    return f"\n\nSelection routed {counts} ({targets})."


def fallback_sentences(fallbacks: pd.DataFrame, paired: pd.DataFrame, metrics: Sequence[str]) -> list[str]:
    """How often each method's retrieval fell back (the `fallbacks` table), and the paired comparisons
    again on the questions where neither method fell back (the `subset` "no fallback" rows of
    `paired`), for the pairs where either one did.
    """
    fell_back = fallbacks[fallbacks["fallbacks"] > 0]
    if fell_back.empty:
        return ["No method's retrieval fell back: every context is what its method retrieves."]
    # Fallback reasons are the kit's own words (never model text), shown as code.
    listed = ", ".join(
        f"**{r.method}** {r.fallbacks} of {r.retrieved} ({r.fallback_rate:.0%}; most often `{r.most_common}`)"
        for r in fell_back.itertuples(index=False)
    )
    lines = [
        f"Retrieval fell back on some questions: {listed}. A fallback shows another method's context "
        "(or none), so each comparison is also given on the questions where neither method fell back."
    ]
    if "subset" in paired:
        either = paired["method"].isin(fell_back["method"]) | paired["baseline"].isin(fell_back["method"])
        rows = paired[(paired["subset"] == "no fallback") & either & paired["metric"].isin(metrics)]
        if not rows.empty:
            lines.append("On the questions where neither method fell back:")
            lines += paired_sentences(rows)
    return lines


def _interval(mean: float, low: float, high: float, digits: int = 2) -> str:
    return f"{mean:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def paired_sentences(paired: pd.DataFrame) -> list[str]:
    """One sentence per comparison, saying what the claim rule supports (interval and Holm test)."""
    lines = []
    for r in paired.itertuples(index=False):
        head = (
            f"**{r.method}** vs {r.baseline} on {r.metric}: {_interval(r.mean_diff, r.ci_low, r.ci_high)} "
            f"over {r.n} questions both answered ({r.wins} better, {r.losses} worse; {r.test} "
            f"p={r.p_value:.3g}, Holm {r.p_holm:.3g})"
        )
        direction = "better" if r.mean_diff > 0 else "worse"
        claim = (
            f"the interval excludes zero and the Holm-adjusted test rejects, so {r.method} did {direction} "
            f"than {r.baseline} on these questions"
        )
        lines.append(f"{head}: {claim_text(r.ci_low, r.ci_high, r.p_holm, claim)}.")
    return lines


def complementarity_sentences(comp: pd.DataFrame, metric: str = "accuracy") -> list[str]:
    return [
        f"**{r.method}** was right where {r.baseline} was wrong on {r.only_method} of {r.n} questions "
        f"({r.only_method_share:.0%}), the reverse on {r.only_baseline} ({r.only_baseline_share:.0%}); "
        f"both right on {r.both}, neither on {r.neither} ({metric})."
        for r in comp.itertuples(index=False)
    ]


def answer_failure_sentence(summary: pd.DataFrame) -> str:
    failed = summary[summary["failures"] > 0]
    return failure_sentence(
        {r.method: f"{r.failures} of {r.questions}" for r in failed.itertuples(index=False)},
        "Every method produced an answer for every question.",
        "Answers lost to model failures",
        "excluded from every mean and test",
    )


def findings_text(
    summary: pd.DataFrame,
    paired: pd.DataFrame,
    comp: pd.DataFrame,
    fallbacks: pd.DataFrame,
    findings: pd.DataFrame,
    *,
    quality: str,
    recall: str | None,
    also: Sequence[str] = (),
) -> str:
    """The narrative of a results section, worded from the tables: what they support and what not.
    `also`: further metrics whose paired comparisons are stated (e.g. EM beside accuracy). A paired
    table with a `subset` column (`evaluation.score_tables.paired_by_fallback`) is read on all
    questions, and its "no fallback" rows are stated after the fallback counts.
    """
    lines = [answer_failure_sentence(summary)]
    main = on_all_questions(paired)
    top = statements(findings, "highest_mean")
    if not top.empty:
        best = top.iloc[0]
        n = summary.set_index("method").loc[best["subject"], f"{quality}_n"]
        lines.append(
            f"Highest mean {quality}: **{best['subject']}**, {best['value']:.2f} "
            f"[{best['ci_low']:.2f}, {best['ci_high']:.2f}] over {int(n)} "
            "answered questions. A ranking of point estimates is not a finding; the paired comparisons "
            "below say which differences the data support."
        )
    for metric in (quality, *also):
        lines += paired_sentences(main[main["metric"] == metric]) if not main.empty else []
    lines += complementarity_sentences(comp)
    if recall and recall in summary and summary[recall].notna().any():
        shown = summary.dropna(subset=[recall])
        values = ", ".join(f"{m} {v:.2f}" for m, v in zip(shown["method"], shown[recall], strict=True))
        model_free = statements(findings, "answer_only_model_call")
        listed = ", ".join(model_free.loc[model_free["value"] == 1, "subject"])
        lines.append(
            f"Supporting-passage {recall} (share of gold documents among the passages shown): {values}. "
            f"Methods whose only model call is the answer ({listed or 'none'}) retrieved "
            "without a model, so their recall does not depend on the generator at all."
        )
        if not main.empty and (main["metric"] == recall).any():
            lines += paired_sentences(main[main["metric"] == recall])
    lines += fallback_sentences(fallbacks, paired, [quality, *also])
    n = int(stated(findings, "questions_per_method")["value"])
    alpha = stated(findings, "claim_alpha")["value"]
    lines.append(
        f"Every method saw the same {n} questions; a difference is a finding only when its paired interval "
        f"excludes zero and the Holm-adjusted test rejects at {alpha:g}; anything else is reported "
        "as no claim rather than as a trend."
    )
    if answered_by_embedded_model(findings):
        lines.append(
            embedded_disclaimer("These answers")
            + " The retrieval recall numbers, computed against the data set's gold passages, are the "
            "trustworthy part of this run."
        )
    return "\n\n".join(lines)


def _supported_pair_phrases(paired: pd.DataFrame) -> list[str]:
    """For each comparison the claim rule supports: "method better (worse) than baseline on metric"."""
    return [
        f"{r.method} {'better' if r.mean_diff > 0 else 'worse'} than {r.baseline} on {r.metric} "
        f"({_interval(r.mean_diff, r.ci_low, r.ci_high)})"
        for r in paired.itertuples(index=False)
        if claim_supported(r.ci_low, r.ci_high, r.p_holm)
    ]


def findings_headline(
    summary: pd.DataFrame, paired: pd.DataFrame, findings: pd.DataFrame, quality: str
) -> str:
    """The one line of notebooks 04 and 05 for the index page: the highest mean of `quality` and
    which paired comparisons with the baseline (all questions) the claim rule supports.
    """
    top = statements(findings, "highest_mean")
    if top.empty:
        return f"No method has a {quality} value: every answer failed (see the failures table)."
    best = top.iloc[0]
    n = summary.set_index("method").loc[best["subject"], f"{quality}_n"]
    main = on_all_questions(paired)
    rows = main[main["metric"] == quality] if not main.empty else main
    supported = _supported_pair_phrases(rows)
    compared = int(stated(findings, "compared_with_baseline", quality)["value"])
    return (
        f"Highest mean {quality}: {best['subject']} {best['value']:.2f} [{best['ci_low']:.2f}, "
        f"{best['ci_high']:.2f}] over {int(n)} questions; "
        + (
            "paired with the baseline: " + "; ".join(supported) + "."
            if supported
            else f"no paired {quality} difference with the baseline is a finding ({compared} compared)."
        )
    )
