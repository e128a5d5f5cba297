"""What notebooks 06 and 07 say of the judge tables: the estimate before paying, alignment,
failures, and the audit and comparison findings, generated from the numbers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ragtrial.evaluation.findings import FINDINGS_TABLE, stated, statements
from ragtrial.report.narrative import wording
from ragtrial.report.narrative.common import embedded_disclaimer, failure_sentence
from ragtrial.report.narrative.narration import Narration, SavedTables, saved
from ragtrial.stats import claim_text


def _value(findings: pd.DataFrame, statement: str, subject: str = "") -> float:
    return stated(findings, statement, subject)["value"]


def _states(findings: pd.DataFrame, statement: str) -> bool:
    return not statements(findings, statement).empty


def estimate_sentence(findings: pd.DataFrame) -> str:
    text = (
        f"This run makes at most **{int(_value(findings, 'estimated_calls'))} model calls**, about "
        f"{int(_value(findings, 'estimated_prompt_tokens')):,} prompt tokens (cl100k) and at most "
        f"{int(_value(findings, 'estimated_completion_tokens')):,} completion tokens"
    )
    if _states(findings, "estimated_minutes"):
        text += (
            f"; on the embedded model that is at most about {_value(findings, 'estimated_minutes'):.1f} "
            "minutes (less where the response cache already holds a call)"
        )
    return text + "."


def failed_answers_note(findings: pd.DataFrame) -> str:
    """Notebooks 06 and 07, under the answers: how many answers failed; empty when none did."""
    failed = int(_value(findings, "missing_answers"))
    if not failed:
        return ""
    return f"{failed} answer(s) failed (see the answer failures table); their pairs are not judged."


def length_sentence(findings: pd.DataFrame) -> str:
    """Notebook 06's length audit (Fig. 6): the longer answer's win rate by token gap, on the classic
    verdicts exchanged over both orders (the table's `verdicts_from` says so too), ties counted apart.
    """
    verdicts, ties = int(_value(findings, "length_verdicts")), int(_value(findings, "length_ties"))
    how = (
        "**Length** (by token gap, as the paper measures length bias, on the classic protocol's verdicts "
        "with position bias removed: per question, the answer both orders named, a tie when they "
        "disagreed; the paper exchanges its rubric scores instead)"
    )
    if not verdicts:
        return f"{how}: all {ties} verdicts on answers of different lengths were ties, so no answer won."
    return (
        f"{how}: over {verdicts} verdicts with a winner ({ties} ties left out), the longer answer won "
        f"{_pct(_value(findings, 'longer_win_rate'))} (about "
        f"{_pct(_value(findings, 'no_bias_longer_win_rate'))} without length bias); per gap bin in the "
        "table above."
    )


ORDER_NAMES = {"AB": "A shown first", "BA": "B shown first"}


def classic_order_sentences(classic: pd.DataFrame, flips: pd.DataFrame) -> list[str]:
    """Per pair, the classic protocol's overall verdict in each fixed order it ran (never pooled),
    and the order flip where both ran.
    """
    lines = []
    overall = classic[classic["aspect"] == "overall"]
    for pair, g in overall.groupby("pair", sort=False):
        parts = [
            f"{ORDER_NAMES[r.position]}, A's win rate {_pct(r.score_a)} (win/tie/loss {r.wins_a}/{r.ties}/"
            f"{r.wins_b} of {r.n} votes on {r.questions} questions; relative win rate "
            f"{r.relative_win_rate:+.2f} [{r.rwr_ci_low:+.2f}, {r.rwr_ci_high:+.2f}], {r.test} "
            f"p={r.p_value:.3g}, Holm {r.p_holm:.3g}): "
            + claim_text(
                r.rwr_ci_low, r.rwr_ci_high, r.p_holm, f"{'A' if r.relative_win_rate > 0 else 'B'} better"
            )
            for r in g.itertuples(index=False)
        ]
        line = f"**{pair}, classic overall**: " + "; ".join(parts) + "."
        flip = flips[(flips["pair"] == pair) & (flips["aspect"] == "overall")]
        if not flip.empty:
            line += (
                f" Order flip (A-first minus B-first win rate): {flip['flip'].iloc[0]:+.0%}; without "
                "position bias it is about zero."
            )
        lines.append(line)
    return lines


def _pct(x: float) -> str:
    return f"{x:.0%}"


def _rwr(r: Any) -> str:  # a row of itertuples: its fields are the columns
    return f"{r.relative_win_rate:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]"


def detectable_clause(r: Any) -> str:
    """What a sanity check (a row of `sanity_check`) could have detected: its saved
    `detectable_difference` at `detection_power` and `detection_alpha`. A relative win rate lies in
    [-1, 1], so a detectable difference beyond 1 is none at all.
    """
    if math.isnan(r.detectable_difference):
        return "its interval has no width, so what the check could have detected cannot be stated"
    power = f"with {r.detection_power:.0%} power at the {r.detection_alpha:g} level"
    if r.detectable_difference > 1:
        return (
            f"on {r.questions} questions it could not detect even the largest relative win rate {power}, "
            "so it says nothing of the judge's fairness"
        )
    return (
        f"on {r.questions} questions it detects a relative win rate of ±{r.detectable_difference:.2f} "
        f"{power}, so a smaller bias could go unseen"
    )


def rubric_sentence(findings: pd.DataFrame) -> str:
    """Whose wording the unbiased protocol's rubrics are (`rubric_wording`): the paper prints the
    criteria of Directness alone (seed 000, Table I); empty when the unbiased protocol did not run.
    """
    rubrics = statements(findings, "rubric_wording")
    if rubrics.empty:
        return ""
    paper = [r.subject for r in rubrics.itertuples(index=False) if r.value == 1]
    kit = [r.subject for r in rubrics.itertuples(index=False) if r.value == 0]
    parts = []
    if paper:
        parts.append(f"{', '.join(paper)} {'is' if len(paper) == 1 else 'are'} the paper's wording")
    if kit:
        parts.append(
            f"{', '.join(kit)} {'is' if len(kit) == 1 else 'are'} the kit's own wording, as the paper "
            "prints the criteria of Directness alone (seed 000, Table I)"
        )
    return "**Rubrics** of the unbiased protocol: " + "; ".join(parts) + "."


def alignment_sentence(findings: pd.DataFrame) -> str:
    if not _states(findings, "alignment_pairs"):
        return ""
    aligned, pairs = int(_value(findings, "aligned_pairs")), int(_value(findings, "alignment_pairs"))
    outcomes = statements(findings, "alignment_outcome")
    text = (
        f"**Length alignment** (tolerance {int(_value(findings, 'alignment_tolerance'))} words) kept "
        f"{aligned} of {pairs} pairs ({_pct(_value(findings, 'aligned_share'))}; the paper aligns about "
        f"{_pct(_value(findings, 'seed_aligned_share'))}): "
        + ", ".join(f"{int(r.value)} {r.subject}" for r in outcomes.itertuples(index=False))
        + "."
    )
    if _states(findings, "aligned_gap_before"):
        text += (
            f" The mean word gap of the kept pairs went from {_value(findings, 'aligned_gap_before'):.1f} to "
            f"{_value(findings, 'aligned_gap_after'):.1f}."
        )
    return text + trial_scope_sentence(findings)


def trial_scope_sentence(findings: pd.DataFrame) -> str:
    """What each trial re-ran: answers of its own (seed 000's trials) or the judge alone."""
    if not _states(findings, "answer_trials"):
        return ""
    trials, fresh = int(_value(findings, "trials_run")), int(_value(findings, "answer_trials"))
    if trials == 1:
        return " One trial: its answers were written and aligned once."
    if fresh == trials:
        return (
            f" Each of the {trials} trials wrote, aligned and judged answers of its own "
            "(`trial_scope: answers`, as seed 000 re-executes the evaluation per trial)."
        )
    return (
        f" The answers were written and aligned once and each of the {trials} trials re-sampled the judge "
        "alone (`trial_scope: judge_only`): the trial spread is the judge's noise, not the answers' (seed "
        "000 writes every answer again in every trial)."
    )


def judge_failure_sentence(findings: pd.DataFrame) -> str:
    if not _states(findings, "judge_calls"):
        return ""
    calls = int(_value(findings, "judge_calls"))
    kinds = statements(findings, "judge_failure_kind")
    return failure_sentence(
        {r.subject: str(int(r.value)) for r in kinds.itertuples(index=False)},
        f"All {calls} judge calls returned a usable reply.",
        f"{int(_value(findings, 'judge_failures'))} of {calls} judge calls failed after the repair round",
        f"{int(_value(findings, 'excluded_judgments'))} (question, trial) judgment(s) of the unbiased "
        "protocol were left out of their trial",
    )


def on_embedded_model(findings: pd.DataFrame) -> bool:
    """Whether the run is on the embedded default model (its disclaimer is said then)."""
    return _states(findings, "embedded_model") and bool(_value(findings, "embedded_model"))


EMBEDDED_NOTE = embedded_disclaimer("All verdicts here") + (
    " They show what each audit measures, not how a capable judge behaves."
)


def audit_findings(sanity: pd.DataFrame, positions: pd.DataFrame, findings: pd.DataFrame) -> str:
    """The narrative of notebook 06, worded from its sanity check, position audit and findings."""
    lines = [wording.answer_length_sentence(findings)]
    for r in sanity.itertuples(index=False):
        lines.append(
            f"**Sanity check, {r.protocol}** ({r.pair}, {r.questions} questions): relative win rate of run A "
            f"{_rwr(r)}, win/tie/loss {_pct(r.win_rate)}/{_pct(r.tie_rate)}/{_pct(r.loss_rate)}, Holm "
            f"p={r.p_holm:.3g}: {r.verdict}."
            + (
                " Both runs are the same method, so this difference is a false finding."
                if r.supported
                else f" No difference shown: {detectable_clause(r)}."
            )
        )
    for (pair, protocol), g in positions.groupby(["pair", "protocol"], sort=False):
        first, a_won = (
            dict(zip(g["order"], g[c], strict=True)) for c in ("first_shown_win_rate", "a_win_rate")
        )
        difference = _value(findings, "position_difference", f"{pair}, {protocol}")
        lines.append(
            f"**Position**, {protocol} ({pair}): run A won {_pct(a_won.get('AB', np.nan))} of the questions "
            f"when shown first and {_pct(a_won.get('BA', np.nan))} when shown second (difference "
            f"{difference:+.0%}); the answer shown first won "
            f"{_pct(first.get('AB', np.nan))} and {_pct(first.get('BA', np.nan))} of the questions in the "
            "two orders. Without position bias the difference is near zero."
        )
    if not _states(findings, "length_verdicts"):
        lines.append(
            "**Length**: no pair had answers of different token lengths judged in both orders, so length "
            "bias could not be measured."
        )
    else:
        lines.append(length_sentence(findings))
    if _states(findings, "trials"):
        lines.append(
            f"**Trials**: over {int(_value(findings, 'trials'))} trials the relative win rate ranged from "
            f"{_value(findings, 'trial_rwr_min'):+.2f} to {_value(findings, 'trial_rwr_max'):+.2f} (median "
            f"{_value(findings, 'trial_rwr_median'):+.2f}, quartiles {_value(findings, 'trial_rwr_q1'):+.2f} "
            f"to {_value(findings, 'trial_rwr_q3'):+.2f}): one trial could have reported any of these."
        )
    lines += [alignment_sentence(findings), rubric_sentence(findings), judge_failure_sentence(findings)]
    lines += [EMBEDDED_NOTE] if on_embedded_model(findings) else []
    return "\n\n".join(line for line in lines if line)


def unbiased_pair_sentences(summary: pd.DataFrame, findings: pd.DataFrame) -> list[str]:
    """Per judged pair, the unbiased protocol's overall score difference with its interval and test."""
    return [
        f"{r.pair}: per-question overall score difference {r.score_diff:+.2f} "
        f"[{r.score_diff_ci_low:+.2f}, {r.score_diff_ci_high:+.2f}] (`{r.test}`, p={r.p_value:.3g}, "
        f"Holm-adjusted over {int(_value(findings, 'unbiased_pairs'))} pair(s) {r.p_holm:.3g}); mean tie "
        f"rate over trials {_pct(r.tie_rate)}."
        for r in summary.itertuples(index=False)
    ]


def comparison_findings(
    sanity: pd.DataFrame,
    classic: pd.DataFrame,
    flips: pd.DataFrame,
    summary: pd.DataFrame,
    findings: pd.DataFrame,
) -> str:
    """The narrative of notebook 07: per pair, what each protocol supports and whether they agree,
    and the classic protocol in each fixed order it ran, with the order flip.
    """
    lines = [wording.answer_length_sentence(findings), *classic_order_sentences(classic, flips)]
    for pair, g in sanity.groupby("pair", sort=False):
        by = g.set_index("protocol")
        parts = [
            f"{p} {_rwr(r)}: {r.verdict}" for p, r in zip(by.index, by.itertuples(index=False), strict=True)
        ]
        line = f"**{pair}**: relative win rate " + "; ".join(parts) + "."
        # A conclusion is the claim rule's outcome and its direction, not the wording of its reason.
        said = {p: (r.supported, r.supported and r.relative_win_rate > 0) for p, r in by.iterrows()}
        if {"classic", "unbiased"} <= said.keys() and said["classic"] != said["unbiased"]:
            line += " The two protocols support different conclusions on the same answers."
        lines.append(line)
    lines += unbiased_pair_sentences(summary, findings)
    ties = statements(findings, "aspect_tie_rate")
    if not ties.empty:
        lines.append(
            "Tie rate per aspect (mean over pairs and trials): "
            + ", ".join(f"{r.subject} {_pct(r.value)}" for r in ties.itertuples(index=False))
            + "."
        )
    lines += [alignment_sentence(findings), rubric_sentence(findings), judge_failure_sentence(findings)]
    lines += [EMBEDDED_NOTE] if on_embedded_model(findings) else []
    return "\n\n".join(line for line in lines if line)


def _headline_protocol(sanity: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """The protocol a judge notebook's headline reports: the unbiased one when it ran, else the classic."""
    protocol = "unbiased" if (sanity["protocol"] == "unbiased").any() else "classic"
    return protocol, sanity[sanity["protocol"] == protocol]


def audit_headline(sanity: pd.DataFrame) -> str:
    """The one line of notebook 06 for the index page: whether the judge called the method against
    itself a draw (the unbiased protocol's sanity check when it ran), and when it did, how large a
    difference the check could have detected.
    """
    if sanity.empty:
        return "No pair was judged, so the judge could not be audited (see the failures)."
    protocol, rows = _headline_protocol(sanity)
    r = next(rows.itertuples(index=False))
    verdict = (
        "the judge reports a difference between two runs of the same method, a false finding"
        if r.supported
        else f"no difference under the claim rule; {detectable_clause(r)}"
    )
    return (
        f"Self-vs-self ({r.pair}, {protocol} protocol, {r.questions} questions): relative win rate of run A "
        f"{_rwr(r)}: {verdict}."
    )


def comparison_headline(sanity: pd.DataFrame, findings: pd.DataFrame) -> str:
    """The one line of notebook 07 for the index page: per pair, the relative win rate by the
    unbiased protocol (the classic one when the unbiased did not run), and which the claim rule supports.
    """
    if sanity.empty:
        return "No pair was judged (see the failures)."
    protocol, rows = _headline_protocol(sanity)
    pairs = [
        f"{r.pair} {_rwr(r)}"
        + (f", the {'first' if r.relative_win_rate > 0 else 'second'} answers better" if r.supported else "")
        for r in rows.itertuples(index=False)
    ]
    supported = int(_value(findings, "headline_supported", protocol))
    judged = int(_value(findings, "headline_pairs", protocol))
    return f"Relative win rate by the {protocol} judge: {'; '.join(pairs)}; " + (
        f"{supported} of {judged} pair(s) differ under the claim rule."
        if supported
        else "no pair differs under the claim rule."
    )


def narrate_bias_audit(tables: SavedTables) -> Narration:
    """Notebook 06's headline and findings, from its saved tables."""
    sanity = saved(tables, "sanity_check")
    findings = audit_findings(sanity, saved(tables, "position_bias"), saved(tables, FINDINGS_TABLE))
    return Narration(audit_headline(sanity), findings)


def narrate_pairwise(tables: SavedTables) -> Narration:
    """Notebook 07's headline and findings, from its saved tables."""
    sanity, findings = saved(tables, "protocols_side_by_side"), saved(tables, FINDINGS_TABLE)
    text = comparison_findings(
        sanity,
        saved(tables, "classic_summary"),
        saved(tables, "classic_order_flip"),
        saved(tables, "unbiased_summary"),
        findings,
    )
    return Narration(comparison_headline(sanity, findings), text)
