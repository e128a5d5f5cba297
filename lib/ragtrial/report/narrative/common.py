"""Narrative sentences generated from the tables, so a report says only what the numbers support:
the one claim rule (`ragtrial.stats.claim_text`: the interval excludes zero and the adjusted test
rejects, otherwise "no claim"), one failure sentence, one
embedded-model disclaimer, and the findings of notebooks 04 and 05.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from ragtrial.evaluation.run_methods import fallback_table
from ragtrial.report.markdown import escape_markdown
from ragtrial.stats import CLAIM_ALPHA, claim_supported, claim_text

if TYPE_CHECKING:  # experiment tables work on answer frames; only run_methods needs live methods
    from ragtrial.config.methods import AnswerSettings
    from ragtrial.config.retrieval import RetrievalSettings
    from ragtrial.methods.base import Method


def setup_note(
    methods: Sequence[Method],
    unavailable: pd.DataFrame,
    settings: AnswerSettings,
    k: int,
    baseline: str | None = None,
    retrieval: RetrievalSettings | None = None,
) -> str:
    """What ran: methods, baseline (when the experiment has one), k, budget, prompt, which methods
    the index could not support, and (given the `retrieval` settings) the retrieval choices that
    decide what a method shows: the graph each method walked, the fallback, the keyword scorer.
    """
    compared = f"; baseline **{baseline}**" if baseline else ""
    note = (
        f"Methods: {', '.join(m.name for m in methods)}{compared}; k = {k}; context budget "
        f"{settings.context_budget} tokens; prompt `{settings.answer_prompt}`, at most "
        f"{settings.answer_max_tokens} tokens."
    )
    if retrieval is not None:
        note += "\n\n" + retrieval_note(methods, retrieval)
    if not unavailable.empty:
        note += "\n\nNot run, because the index cannot support them: " + "; ".join(
            f"**{m}**: {r}" for m, r in unavailable.itertuples(index=False)
        )
    return note


def retrieval_note(methods: Sequence[Method], retrieval: RetrievalSettings) -> str:
    """The retrieval choices behind the methods' context, each named by its settings key."""
    walked = [f"{m.name} {m.graph_origin}" for m in methods if m.graph_origin]
    fallback = {"vector": "the vector retrieval", "none": "no context"}[retrieval.graph_fallback]
    lines = [
        f"Graph walked (retrieval.graph_origin = {retrieval.graph_origin}): {', '.join(walked)}."
        if walked
        else "No method retrieves from the graph.",
        f"A graph retriever that links no entity shows {fallback} (retrieval.graph_fallback = "
        f"{retrieval.graph_fallback}); every such question is counted as a fallback.",
        f"Keyword half of hybrid: {retrieval.keyword} (retrieval.keyword).",
    ]
    if retrieval.naive_rag_fills_budget:
        lines.append(
            "naive_rag shows chunks in rank order until the context budget is full, not the top k "
            "(retrieval.naive_rag_fills_budget)."
        )
    return " ".join(lines)


def fallback_sentences(answers: pd.DataFrame, paired: pd.DataFrame, metrics: Sequence[str]) -> list[str]:
    """How often each method's retrieval fell back, and the paired comparisons again on the questions
    where neither method fell back (the `subset` "no fallback" rows of `paired`), for the pairs where
    either one did.
    """
    fell_back = fallback_table(answers).query("fallbacks > 0")
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


EMBEDDED_MODEL = (
    "the embedded default model, Gemma 3 270M (a base model, not instruction-tuned, quantized to 4 bits)"
)


def embedded_disclaimer(what: str) -> str:
    """The one thing every report on the embedded default says of its model-made numbers."""
    return (
        f"{what} come from {EMBEDDED_MODEL}: they prove that the pipeline runs end to end offline, "
        "and are not research findings."
    )


def failure_sentence(counts: dict[str, str], nothing_failed: str, what_failed: str, handling: str) -> str:
    """The one shape of "what failed and what was done about it": failures are counted, listed in
    the failures table and never scored. `counts`: label -> count text, e.g. {"naive_rag": "2 of 8"}.
    """
    if not counts:
        return nothing_failed
    listed = ", ".join(f"{label} {count}" for label, count in counts.items())
    return f"{what_failed} ({listed}): {handling}; each is listed in the failures table, none is scored."


def data_warnings_note(dataset_name: str, warnings: Sequence[str], shown: int = 5) -> str:
    """The flaws of a published data set that the loader kept as published, counted and named."""
    listed = "; ".join(escape_markdown(w) for w in warnings[:shown])
    more = f"; and {len(warnings) - shown} more" if len(warnings) > shown else ""
    return (
        f"**Data warnings.** The data set {escape_markdown(dataset_name)} has {len(warnings)} flaw(s) "
        f"kept as published (listed in the data_warnings table): {listed}{more}."
    )


def answer_failure_sentence(summary: pd.DataFrame) -> str:
    failed = summary[summary["failures"] > 0]
    return failure_sentence(
        {r.method: f"{r.failures} of {r.questions}" for r in failed.itertuples(index=False)},
        "Every method produced an answer for every question.",
        "Answers lost to model failures",
        "excluded from every mean and test",
    )


def findings(
    summary: pd.DataFrame,
    paired: pd.DataFrame,
    comp: pd.DataFrame,
    answers: pd.DataFrame,
    *,
    quality: str,
    recall: str | None,
    embedded: bool,
    also: Sequence[str] = (),
) -> str:
    """The narrative of a results section, generated from the tables: what they support and what not.
    `also`: further metrics whose paired comparisons are stated (e.g. EM beside accuracy). A paired
    table with a `subset` column (`evaluation.scoring.paired_by_fallback`) is read on all questions,
    and its "no fallback" rows are stated after the fallback counts.
    """
    lines = [answer_failure_sentence(summary)]
    main = _on_all_questions(paired)
    top = _highest(summary, quality)
    if top is not None:
        lines.append(
            f"Highest mean {quality}: **{top.method}**, {top[quality]:.2f} "
            f"[{top[f'{quality}_low']:.2f}, {top[f'{quality}_high']:.2f}] over {int(top[f'{quality}_n'])} "
            "answered questions. A ranking of point estimates is not a finding; the paired comparisons "
            "below say which differences the data support."
        )
    for metric in (quality, *also):
        lines += paired_sentences(main[main["metric"] == metric]) if not main.empty else []
    lines += complementarity_sentences(comp)
    if recall and recall in summary and summary[recall].notna().any():
        shown = summary.dropna(subset=[recall])
        values = ", ".join(f"{m} {v:.2f}" for m, v in zip(shown["method"], shown[recall], strict=True))
        model_free = sorted(
            m for m, g in answers.groupby("method") if (g["calls"] == 1).all() and m in set(shown.method)
        )
        lines.append(
            f"Supporting-passage {recall} (share of gold documents among the passages shown): {values}. "
            f"Methods whose only model call is the answer ({', '.join(model_free) or 'none'}) retrieved "
            "without a model, so their recall does not depend on the generator at all."
        )
        if not main.empty and (main["metric"] == recall).any():
            lines += paired_sentences(main[main["metric"] == recall])
    lines += fallback_sentences(answers, paired, [quality, *also])
    n = int(summary["questions"].max()) if not summary.empty else 0
    lines.append(
        f"Every method saw the same {n} questions; a difference is a finding only when its paired interval "
        f"excludes zero and the Holm-adjusted test rejects at {CLAIM_ALPHA:g}; anything else is reported "
        "as no claim rather than as a trend."
    )
    if embedded:
        lines.append(
            embedded_disclaimer("These answers")
            + " The retrieval recall numbers, computed against the data set's gold passages, are the "
            "trustworthy part of this run."
        )
    return "\n\n".join(lines)


def _on_all_questions(paired: pd.DataFrame) -> pd.DataFrame:
    """A paired table's comparisons on all questions (`paired_by_fallback` adds a "no fallback" subset)."""
    return paired[paired["subset"] == "all"] if "subset" in paired else paired


def _highest(summary: pd.DataFrame, quality: str) -> pd.Series | None:
    """The summary row with the highest mean `quality`; None when no method has a value (then the
    summary has no `quality` column at all: every answer failed).
    """
    scored = summary.dropna(subset=[quality]) if quality in summary else summary.iloc[:0]
    return None if scored.empty else scored.sort_values(quality, ascending=False).iloc[0]


def _supported_pair_phrases(paired: pd.DataFrame) -> list[str]:
    """For each comparison the claim rule supports: "method better (worse) than baseline on metric"."""
    return [
        f"{r.method} {'better' if r.mean_diff > 0 else 'worse'} than {r.baseline} on {r.metric} "
        f"({_interval(r.mean_diff, r.ci_low, r.ci_high)})"
        for r in paired.itertuples(index=False)
        if claim_supported(r.ci_low, r.ci_high, r.p_holm)
    ]


def findings_headline(summary: pd.DataFrame, paired: pd.DataFrame, quality: str) -> str:
    """The one line of notebooks 04 and 05 for the index page: the highest mean of `quality` and
    which paired comparisons with the baseline (all questions) the claim rule supports.
    """
    top = _highest(summary, quality)
    if top is None:
        return f"No method has a {quality} value: every answer failed (see the failures table)."
    main = _on_all_questions(paired)
    rows = main[main["metric"] == quality] if not main.empty else main
    supported = _supported_pair_phrases(rows)
    return (
        f"Highest mean {quality}: {top.method} {top[quality]:.2f} [{top[f'{quality}_low']:.2f}, "
        f"{top[f'{quality}_high']:.2f}] over {int(top[f'{quality}_n'])} questions; "
        + (
            "paired with the baseline: " + "; ".join(supported) + "."
            if supported
            else f"no paired {quality} difference with the baseline is a finding ({len(rows)} compared)."
        )
    )
