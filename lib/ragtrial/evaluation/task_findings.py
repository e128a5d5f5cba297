"""The findings of notebooks 04 (question answering) and 05 (summarization), and the `setup` table
their setup note words: every figure their prose states that the summary, paired and fallback
tables do not hold as a cell (the method with the highest mean, how many comparisons were made,
which methods retrieve without a model, how questions were routed, the kit's claim level).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from ragtrial.evaluation.findings import Finding, claim_alpha_finding, embedded_model_finding, findings_table

if TYPE_CHECKING:  # the setup table reads live methods and settings once, when the run starts
    from ragtrial.config.methods import AnswerSettings
    from ragtrial.config.retrieval import RetrievalSettings
    from ragtrial.methods.base import Method


def setup_table(
    methods: Sequence[Method],
    settings: AnswerSettings,
    k: int,
    baseline: str | None = None,
    retrieval: RetrievalSettings | None = None,
) -> pd.DataFrame:
    """What ran, one row per method: the graph it walked, where it routes questions (Selection),
    and the settings its answers used (k, context budget, prompt, answer tokens, whether an answer
    is cut to its first line and which question types are not, the baseline), with
    the retrieval settings that decide what a method shows when `retrieval` is given.
    """
    rows = []
    for method in methods:
        routes = getattr(method, "routes", {})
        row = {
            "method": method.name,
            "graph_origin": method.graph_origin,
            "routes": ", ".join(f"{label} → {routed.name}" for label, routed in routes.items()),
            "baseline": baseline or "",
            "k": k,
            "context_budget": settings.context_budget,
            "answer_prompt": settings.answer_prompt,
            "answer_max_tokens": settings.answer_max_tokens,
            "first_line_only": settings.first_line_only,
            "whole_answer_types": ", ".join(settings.whole_answer_types),
        }
        if retrieval is not None:
            row |= {
                "retrieval_graph_origin": retrieval.graph_origin,
                "graph_fallback": retrieval.graph_fallback,
                "keyword": retrieval.keyword,
                "naive_rag_fills_budget": retrieval.naive_rag_fills_budget,
            }
        rows.append(row)
    return pd.DataFrame(rows)


def on_all_questions(paired: pd.DataFrame) -> pd.DataFrame:
    """A paired table's comparisons on all questions (`paired_by_fallback` adds a "no fallback" subset)."""
    return paired[paired["subset"] == "all"] if "subset" in paired else paired


def task_findings(
    summary: pd.DataFrame,
    paired: pd.DataFrame,
    answers: pd.DataFrame,
    *,
    quality: str,
    recall: str | None,
    embedded: bool,
) -> pd.DataFrame:
    """The `findings` table of notebooks 04 and 05 (`report.narrative.tasks` words it): the method
    with the highest mean `quality`, the number of paired `quality` comparisons with the baseline,
    per method with a `recall` value whether the answer is its only model call, how the Selection
    method routed the questions, the most questions a method saw, the claim rule's level, and
    whether the embedded default model answered.
    """
    findings = []
    scored = summary.dropna(subset=[quality]) if quality in summary else summary.iloc[:0]
    if not scored.empty:
        top = scored.sort_values(quality, ascending=False).iloc[0]
        findings.append(
            Finding(
                "highest_mean",
                f"highest mean {quality} over the answered questions",
                float(top[quality]),
                "summary",
                subject=top["method"],
                ci_low=float(top[f"{quality}_low"]),
                ci_high=float(top[f"{quality}_high"]),
            )
        )
    main = on_all_questions(paired)
    compared = main[main["metric"] == quality] if not main.empty else main
    findings.append(
        Finding(
            "compared_with_baseline",
            f"paired {quality} comparisons with the baseline on all questions",
            len(compared),
            "paired_vs_baseline",
            subject=quality,
        )
    )
    if recall and recall in summary:
        with_recall = set(summary.dropna(subset=[recall])["method"])
        for method, group in answers.groupby("method", sort=True):
            if method in with_recall:
                findings.append(
                    Finding(
                        "answer_only_model_call",
                        "1 when the answer is the method's only model call on every question, else 0",
                        float((group["calls"] == 1).all()),
                        "answers",
                        subject=method,
                    )
                )
    routed = answers.loc[answers["route"] != "", "route"].value_counts()
    findings += [
        Finding(
            "routed", "questions the method selection routed this way", int(count), "answers", subject=label
        )
        for label, count in routed.items()
    ]
    findings += [
        Finding(
            "questions_per_method",
            "questions every method saw",
            int(summary["questions"].max()) if not summary.empty else 0,
            "summary",
        ),
        claim_alpha_finding(),
        embedded_model_finding(embedded),
    ]
    return findings_table(findings)
