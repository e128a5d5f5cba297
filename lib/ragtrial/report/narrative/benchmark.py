"""Notebook 13's narrative, worded from its saved tables alone (`baselines`, `comparisons`, `summary`,
`failure_counts`, `latency`, `graph_bills`, `reproduction`, `findings`): per group and question type,
whether a graph retriever beats the group's strongest plain retriever under the claim rule, with the
graph's bill; the fallbacks; the published figures beside the kit's. No model answered anything, so
no disclaimer applies.
"""

from __future__ import annotations

import pandas as pd

from ragtrial.evaluation.findings import statements
from ragtrial.evaluation.retrieval_benchmark import (
    ALL_TYPES,
    KIT_GROUP,
    WITHOUT_FALLBACKS,
    best_graph_comparisons,
)
from ragtrial.report.markdown import escape_markdown
from ragtrial.report.narrative.answer_entities import answer_entities_paragraph
from ragtrial.report.narrative.narration import Narration, SavedTables, saved
from ragtrial.report.narrative.wording import signed_interval
from ragtrial.stats import claim_text


def narrate(tables: SavedTables) -> Narration:
    comparisons, chosen = saved(tables, "comparisons"), saved(tables, "baselines")
    findings = saved(tables, "findings")
    (counted,) = statements(findings, "dataset_questions").itertuples(index=False)
    dataset = escape_markdown(str(counted.subject))
    paragraphs = [
        f"**{dataset}**: {int(counted.value)} questions with gold passages, ranked without any model call."
    ]
    paragraphs += [_group_paragraph(comparisons, c) for c in chosen.itertuples(index=False)]
    paragraphs.append(_fallback_paragraph(saved(tables, "failure_counts")))
    paragraphs.append(_bill_paragraph(saved(tables, "graph_bills"), saved(tables, "latency")))
    reproduction = tables.get("reproduction")
    if reproduction is not None and not reproduction.empty:
        paragraphs.append(_reproduction_paragraph(reproduction))
    paragraphs.append(answer_entities_paragraph(tables))
    return Narration(_headline(dataset, comparisons, chosen), "\n\n".join(p for p in paragraphs if p))


def _best_graph(comparisons: pd.DataFrame, group: str, measure: str, question_type: str) -> pd.Series | None:
    """The graph method with the largest mean difference on all questions of one question type."""
    best = best_graph_comparisons(comparisons, group, measure)
    best = best[best["question_type"] == question_type]
    return None if best.empty else best.iloc[0]


def _verdict(row: pd.Series) -> str:
    what = f"{escape_markdown(row['method'])} vs {escape_markdown(row['baseline'])}"
    claim = f"{escape_markdown(row['method'])} retrieves more of the gold evidence"
    if row["mean_diff"] < 0:
        claim = f"{escape_markdown(row['baseline'])} retrieves more of the gold evidence"
    interval = signed_interval(row["mean_diff"], row["ci_low"], row["ci_high"])
    rule = claim_text(row["ci_low"], row["ci_high"], row["p_holm"], claim)
    return f"{what} {interval} over {int(row['n'])} questions: {rule}"


def _headline(dataset: str, comparisons: pd.DataFrame, chosen: pd.DataFrame) -> str:
    kit = chosen[chosen["group"] == KIT_GROUP]
    if kit.empty:
        return f"{dataset}: no plain retriever to compare the graph retrievers with."
    c = kit.iloc[0]
    best = _best_graph(comparisons, KIT_GROUP, c["measure"], ALL_TYPES)
    if best is None:
        return f"{dataset}: no graph retriever was compared with {c['baseline']}."
    return f"{dataset}, `{c['measure']}`, best graph retriever: {_verdict(best)}"


def _group_paragraph(comparisons: pd.DataFrame, c: object) -> str:
    group, measure, baseline = str(c.group), str(c.measure), str(c.baseline)  # type: ignore[attr-defined]
    lines = [
        f"**Group {escape_markdown(group)}** — each retriever paired with {escape_markdown(baseline)} "
        f"({escape_markdown(str(c.rule))}) on `{measure}`:"  # type: ignore[attr-defined]
    ]
    of_group = comparisons[(comparisons["group"] == group) & (comparisons["measure"] == measure)]
    for qtype in dict.fromkeys(of_group["question_type"]):
        best = _best_graph(comparisons, group, measure, qtype)
        if best is None:
            continue
        line = f"- {escape_markdown(str(qtype))}: best graph retriever {_verdict(best)}"
        without = of_group[
            (of_group["variant"] == WITHOUT_FALLBACKS)
            & (of_group["question_type"] == qtype)
            & (of_group["method"] == best["method"])
            & (of_group["status"] == "ok")
        ]
        if not without.empty:
            w = without.iloc[0]
            line += (
                f"; without the questions it fell back on, "
                f"{signed_interval(w['mean_diff'], w['ci_low'], w['ci_high'])} over {int(w['n'])}"
            )
        lines.append(line + ".")
    return "\n".join(lines)


def _fallback_paragraph(counts: pd.DataFrame) -> str:
    fell = counts[counts["fallbacks"] > 0]
    missing = counts[counts["not_scored"] > 0]
    parts = [
        f"{escape_markdown(r.method)} fell back on {r.fallbacks} of {r.questions} questions"
        for r in fell.itertuples(index=False)
    ]
    parts += [
        f"{escape_markdown(r.method)} has no result for {r.not_scored} of {r.questions} questions "
        "(not scored)"
        for r in missing.itertuples(index=False)
    ]
    if not parts:
        return "No retriever fell back and every imported result covers every question."
    return (
        "Fallbacks (a graph retriever that linked no usable entity shows the vector retrieval, and is "
        "scored as shown; the comparisons are also given without those questions): "
        + "; ".join(parts)
        + ". The failure_counts table gives the reasons."
    )


def _bill_paragraph(bills: pd.DataFrame, latency: pd.DataFrame) -> str:
    parts = []
    for b in bills.itertuples(index=False):
        text = (
            f"the {escape_markdown(b.graph)} graph cost {b.model_calls} model calls and "
            f"{b.wall_s:.1f} s of wall time to build here (the passages' own index {b.passages_wall_s:.1f} s)"
        )
        if pd.notna(b.published_cost_usd):
            where = f"`{b.published_cost_source}`"
            text += f"; its publication states ${b.published_cost_usd:.2f} ({where})"
        elif b.published_cost_source:
            text += f" (`{b.published_cost_source}`)"
        parts.append(text)
    timing = ", ".join(
        f"{escape_markdown(r.method)} {r.p50_ms:.1f} / {r.p95_ms:.1f} ms"
        for r in latency.itertuples(index=False)
    )
    return f"The graph's bill: {'; '.join(parts)}. Retrieval latency per question (p50 / p95): {timing}."


def _reproduction_paragraph(reproduction: pd.DataFrame) -> str:
    lines = ["Published figures beside the kit's (the reproduction table gives sources and differences):"]
    for r in reproduction.itertuples(index=False):
        inside = "inside" if r.in_interval else "outside"
        lines.append(
            f"- `{r.paper}`, `{r.published_row}` `{r.kit_measure}`: published "
            f"{r.published:.2f}, kit {escape_markdown(r.kit_method)} {r.kit_mean:.2f} "
            f"[{r.kit_ci_low:.2f}, {r.kit_ci_high:.2f}] ({inside} the interval)"
        )
    return "\n".join(lines)
