"""Narrative sentences generated from the tables, so a report says only what the numbers support:
the one claim rule (`ragtrial.stats.claim_text`: the interval excludes zero and the adjusted test
rejects, otherwise "no claim"), one failure sentence, one
embedded-model disclaimer, and the findings of notebooks 04 and 05.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from ragtrial.report.markdown import escape_markdown
from ragtrial.stats import claim_text

if TYPE_CHECKING:  # experiment tables work on answer frames; only run_methods needs live methods
    from ragtrial.config.methods import AnswerSettings
    from ragtrial.methods.base import Method


def setup_note(
    methods: Sequence[Method],
    unavailable: pd.DataFrame,
    settings: AnswerSettings,
    k: int,
    baseline: str | None = None,
) -> str:
    """What ran: methods, baseline (when the experiment has one), k, budget, prompt, and which
    methods the index could not support.
    """
    compared = f"; baseline **{baseline}**" if baseline else ""
    note = (
        f"Methods: {', '.join(m.name for m in methods)}{compared}; k = {k}; context budget "
        f"{settings.context_budget} tokens; prompt `{settings.answer_prompt}`, at most "
        f"{settings.answer_max_tokens} tokens."
    )
    if not unavailable.empty:
        note += "\n\nNot run, because the index cannot support them: " + "; ".join(
            f"**{m}**: {r}" for m, r in unavailable.itertuples(index=False)
        )
    return note


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
            f"the interval excludes zero, so {r.method} did {direction} than {r.baseline} on these questions"
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
) -> str:
    """The narrative of a results section, generated from the tables: what they support and what not."""
    lines = [answer_failure_sentence(summary)]
    # No `quality` column at all when no answer has a value (every answer failed).
    scored = (
        summary.dropna(subset=[quality]).sort_values(quality, ascending=False) if quality in summary else []
    )
    if len(scored):
        top = scored.iloc[0]
        lines.append(
            f"Highest mean {quality}: **{top.method}**, {top[quality]:.2f} "
            f"[{top[f'{quality}_low']:.2f}, {top[f'{quality}_high']:.2f}] over {int(top[f'{quality}_n'])} "
            "answered questions. A ranking of point estimates is not a finding; the paired comparisons "
            "below say which differences the data support."
        )
    lines += paired_sentences(paired[paired["metric"] == quality]) if not paired.empty else []
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
        if not paired.empty and (paired["metric"] == recall).any():
            lines += paired_sentences(paired[paired["metric"] == recall])
    n = int(summary["questions"].max()) if not summary.empty else 0
    lines.append(
        f"Every method saw the same {n} questions; a difference is a finding only when its paired interval "
        "excludes zero and the Holm-adjusted test rejects at 0.05; anything else is reported as no claim "
        "rather than as a trend."
    )
    if embedded:
        lines.append(
            embedded_disclaimer("These answers")
            + " The retrieval recall numbers, computed against the data set's gold passages, are the "
            "trustworthy part of this run."
        )
    return "\n\n".join(lines)
