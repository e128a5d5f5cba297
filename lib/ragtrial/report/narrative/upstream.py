"""Notebook 11's words: which upstream systems answered (name, version, index), and per pair how far
the kit's reimplementation stands in for the original: context overlap, answer agreement, cost, and
the judge's verdict. Generated from the tables; a measure no question defines is said to be
undefined, never 0.
"""

from __future__ import annotations

import pandas as pd

from ragtrial.evaluation.findings import FINDINGS_TABLE, stated
from ragtrial.evaluation.upstream import ID_KINDS
from ragtrial.report.markdown import escape_markdown
from ragtrial.report.narrative.common import embedded_disclaimer
from ragtrial.report.narrative.judge import (
    alignment_sentence,
    on_embedded_model,
    rubric_sentence,
    unbiased_pair_sentences,
)
from ragtrial.report.narrative.narration import Narration, SavedTables, saved
from ragtrial.stats import claim_supported


def systems_note(systems: pd.DataFrame, unavailable: pd.DataFrame, findings: pd.DataFrame) -> str:
    """The systems as shipped that answered, their versions and index builds; the ones that could not run."""
    if systems.empty:
        lines = ["No upstream system ran."]
    else:
        lines = [
            f"**{escape_markdown(r.system)} {escape_markdown(str(r.version))}** (Python `{r.python}`): "
            + (
                f"index {escape_markdown(r.counts)}, built for {int(r.build_calls)} model call(s) "
                f"({int(r.build_cached_calls)} from the cache), "
                f"{int(stated(findings, 'build_tokens', r.system)['value'])} tokens and "
                f"{int(r.build_embedding_tokens)} embedding tokens."
                if r.index_folder
                else "its index was not built (its methods did not run; why is below)."
            )
            for r in systems.itertuples(index=False)
        ]
    lines += [
        f"**{escape_markdown(r.method)}** did not run: {escape_markdown(r.reason)}"
        for r in unavailable.itertuples(index=False)
    ]
    return "\n\n".join(lines)


def _measure(row: pd.Series, measure: str, label: str) -> str:
    if pd.isna(row[measure]):
        return f"{label} undefined (no question showed it on both sides)"
    return (
        f"{label} {row[measure]:.2f} [{row[f'{measure}_low']:.2f}, {row[f'{measure}_high']:.2f}] "
        f"over {int(row[f'{measure}_n'])} question(s)"
    )


def side_by_side_sentences(summary: pd.DataFrame, judged: pd.DataFrame, findings: pd.DataFrame) -> str:
    """Per (upstream, twin) pair: overlap per id kind, answer agreement, cost per answer; then the
    unbiased judge's verdict per pair, and the embedded model's disclaimer.
    """
    lines = []
    for _, r in summary.iterrows():
        tokens = {
            side: stated(findings, f"{side}_tokens", f"{r.upstream} vs {r.twin}")["value"]
            for side in ("upstream", "twin")
        }
        overlaps = "; ".join(_measure(r, f"overlap_{kind}", kind) for kind in ID_KINDS)
        failed = f" {int(r.failed)} question(s) had a failed side and are not compared." if r.failed else ""
        lines.append(
            f"**{r.upstream} vs {r.twin}** ({int(r.questions)} question(s) both answered).{failed} "
            f"Context overlap (Jaccard of the index ids shown): {overlaps}. Answer agreement: "
            f"{_measure(r, 'answer_f1', 'token F1')}; {_measure(r, 'answer_rouge_l', 'ROUGE-L F')}. "
            f"Cost per answer: {r.upstream_calls:.1f} vs {r.twin_calls:.1f} calls, "
            f"{tokens['upstream']:.0f} vs {tokens['twin']:.0f} tokens, "
            f"{r.upstream_latency_s:.1f} vs {r.twin_latency_s:.1f} s."
        )
    if not judged.empty:
        lines += [
            "**Judged** (unbiased protocol, the upstream system as A):",
            *unbiased_pair_sentences(judged, findings),
        ]
    if on_embedded_model(findings):
        lines.append(embedded_disclaimer("These overlaps, agreements and verdicts"))
    return "\n\n".join(lines)


def upstream_headline(summary: pd.DataFrame, judged: pd.DataFrame) -> str:
    """The one line of notebook 11 for the index page: per (upstream, twin) pair, how far the two
    answers agree (token F1), and which pairs the unbiased judge tells apart under the claim rule.
    """
    if summary.empty:
        return (
            "No upstream system answered beside the kit's version of it (see the methods that did not run)."
        )
    agreement = "; ".join(
        f"{r.upstream} vs {r.twin} {_measure(r, 'answer_f1', 'token F1')}" for _, r in summary.iterrows()
    )
    apart = [
        r.pair
        for r in judged.itertuples(index=False)
        if claim_supported(r.rwr_ci_low, r.rwr_ci_high, r.p_holm)
    ]
    return f"Answer agreement with the kit's versions: {agreement}. " + (
        f"The unbiased judge tells apart: {', '.join(apart)}."
        if apart
        else "The unbiased judge tells no pair apart under the claim rule."
        if len(judged)
        else "No pair was judged."
    )


def narrate(tables: SavedTables) -> Narration:
    """Notebook 11's headline and findings, from its saved tables."""
    summary, judged = saved(tables, "side_by_side_summary"), saved(tables, "unbiased_summary")
    findings = saved(tables, FINDINGS_TABLE)
    parts = [
        side_by_side_sentences(summary, judged, findings),
        alignment_sentence(findings),
        rubric_sentence(findings),
    ]
    text = "\n\n".join(part for part in parts if part)
    return Narration(upstream_headline(summary, judged), text)
