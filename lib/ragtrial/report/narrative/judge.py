"""What notebooks 06 and 07 say of the judge tables: the estimate before paying, alignment,
failures, and the audit and comparison findings, generated from the numbers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ragtrial.config.methods import AnswerSettings
from ragtrial.evaluation.findings import findings_table
from ragtrial.evaluation.judge.aggregate import ALIGNMENT_OUTCOMES, alignment_summary
from ragtrial.evaluation.judge.pairs import METHOD_KEY
from ragtrial.evaluation.run_findings import answer_length_findings
from ragtrial.report.narrative import wording
from ragtrial.report.narrative.common import embedded_disclaimer, failure_sentence
from ragtrial.stats import box_stats, claim_text


def estimate_sentence(estimate: pd.DataFrame) -> str:
    text = (
        f"This run makes at most **{int(estimate['calls'].sum())} model calls**, about "
        f"{int(estimate['prompt_tokens'].sum()):,} prompt tokens (cl100k) and at most "
        f"{int(estimate['completion_tokens_max'].sum()):,} completion tokens"
    )
    if "seconds_est" in estimate:
        text += (
            f"; on the embedded model that is at most about {estimate['seconds_est'].sum() / 60:.1f} minutes "
            "(less where the response cache already holds a call)"
        )
    return text + "."


def answer_length_sentence(settings: AnswerSettings) -> str:
    """How long the judged answers may be (`wording.answer_length_sentence` of the settings' rows)."""
    return wording.answer_length_sentence(findings_table(answer_length_findings(settings)))


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


def _rwr(r: tuple) -> str:
    return f"{r.relative_win_rate:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]"


def alignment_sentence(log: pd.DataFrame, tolerance: int) -> str:
    if log.empty:
        return ""
    how = alignment_summary(log).drop(columns=["pair"]).sum(numeric_only=True)
    aligned = log[log["status"] == "aligned"]
    text = (
        f"**Length alignment** (tolerance {tolerance} words) kept {len(aligned)} of {len(log)} pairs "
        f"({_pct(len(aligned) / len(log))}; the paper aligns about 85%): "
        + ", ".join(f"{int(how.get(k, 0))} {k}" for k in ALIGNMENT_OUTCOMES)
        + "."
    )
    if not aligned.empty:
        text += (
            f" The mean word gap of the kept pairs went from {aligned['gap_before'].mean():.1f} to "
            f"{aligned['gap_after'].mean():.1f}."
        )
    return text


def judge_failure_sentence(failures: pd.DataFrame, judged_calls: int) -> str:
    excluded = failures[failures["stage"] == "judge_unbiased"].drop_duplicates(
        [*METHOD_KEY, "trial", "question_id"]
    )
    return failure_sentence(
        {kind: str(n) for kind, n in failures["kind"].value_counts().items()},
        f"All {judged_calls} judge calls returned a usable reply.",
        f"{len(failures)} of {judged_calls} judge calls failed after the repair round",
        f"{len(excluded)} (question, trial) judgment(s) of the unbiased protocol "
        "were left out of their trial",
    )


EMBEDDED_NOTE = embedded_disclaimer("All verdicts here") + (
    " They show what each audit measures, not how a capable judge behaves."
)


def audit_findings(
    sanity: pd.DataFrame,
    positions: pd.DataFrame,
    length_bins: pd.DataFrame,
    trials: pd.DataFrame,
    alignment: str,
    failures: str,
    answer_note: str,
    embedded: bool,
) -> str:
    """The narrative of notebook 06, generated from its tables."""
    lines = [answer_note]
    for r in sanity.itertuples(index=False):
        lines.append(
            f"**Sanity check, {r.protocol}** ({r.pair}, {r.questions} questions): relative win rate of run A "
            f"{_rwr(r)}, win/tie/loss {_pct(r.win_rate)}/{_pct(r.tie_rate)}/{_pct(r.loss_rate)}, Holm "
            f"p={r.p_holm:.3g}: {r.verdict}."
            + (
                " Both runs are the same method, so this difference is a false finding."
                if r.supported
                else ""
            )
        )
    for (pair, protocol), g in positions.groupby(["pair", "protocol"], sort=False):
        first, a_won = (
            dict(zip(g["order"], g[c], strict=True)) for c in ("first_shown_win_rate", "a_win_rate")
        )
        lines.append(
            f"**Position**, {protocol} ({pair}): run A won {_pct(a_won.get('AB', np.nan))} of the questions "
            f"when shown first and {_pct(a_won.get('BA', np.nan))} when shown second (difference "
            f"{a_won.get('AB', np.nan) - a_won.get('BA', np.nan):+.0%}); the answer shown first won "
            f"{_pct(first.get('AB', np.nan))} and {_pct(first.get('BA', np.nan))} of the questions in the "
            "two orders. Without position bias the difference is near zero."
        )
    if length_bins.empty:
        lines.append(
            "**Length**: no pair had answers of different lengths, so length bias could not be measured."
        )
    else:
        n = int(length_bins["verdicts"].sum())
        won = float((length_bins["longer_win_rate"] * length_bins["verdicts"]).sum() / n)
        lines.append(
            f"**Length**: over {n} classic verdicts with a word gap, the longer answer won {_pct(won)} "
            "(about 50% without length bias); per gap bin in the table above."
        )
    if not trials.empty:
        box = box_stats(trials["relative_win_rate"])
        lines.append(
            f"**Trials**: over {len(trials)} trials the relative win rate ranged from "
            f"{trials['relative_win_rate'].min():+.2f} to {trials['relative_win_rate'].max():+.2f} (median "
            f"{box.median:+.2f}, quartiles {box.q1:+.2f} to {box.q3:+.2f}): one trial could have reported "
            "any of these."
        )
    lines += [alignment, failures] + ([EMBEDDED_NOTE] if embedded else [])
    return "\n\n".join(line for line in lines if line)


def unbiased_pair_sentences(summary: pd.DataFrame) -> list[str]:
    """Per judged pair, the unbiased protocol's overall score difference with its interval and test."""
    return [
        f"{r.pair}: per-question overall score difference {r.score_diff:+.2f} "
        f"[{r.score_diff_ci_low:+.2f}, {r.score_diff_ci_high:+.2f}] ({r.test}, p={r.p_value:.3g}, "
        f"Holm-adjusted over {len(summary)} pair(s) {r.p_holm:.3g}); mean tie rate over trials "
        f"{_pct(r.tie_rate)}."
        for r in summary.itertuples(index=False)
    ]


def comparison_findings(
    sanity: pd.DataFrame,
    classic: pd.DataFrame,
    flips: pd.DataFrame,
    summary: pd.DataFrame,
    aspects: pd.DataFrame,
    alignment: str,
    failures: str,
    answer_note: str,
    embedded: bool,
) -> str:
    """The narrative of notebook 07: per pair, what each protocol supports and whether they agree,
    and the classic protocol in each fixed order it ran, with the order flip.
    """
    lines = [answer_note, *classic_order_sentences(classic, flips)]
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
    lines += unbiased_pair_sentences(summary)
    if not aspects.empty:
        ties = aspects.groupby("aspect", sort=False)["tie_rate"].mean()
        lines.append(
            "Tie rate per aspect (mean over pairs and trials): "
            + ", ".join(f"{a} {_pct(t)}" for a, t in ties.items())
            + "."
        )
    lines += [alignment, failures] + ([EMBEDDED_NOTE] if embedded else [])
    return "\n\n".join(line for line in lines if line)


def _headline_protocol(sanity: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """The protocol a judge notebook's headline reports: the unbiased one when it ran, else the classic."""
    protocol = "unbiased" if (sanity["protocol"] == "unbiased").any() else "classic"
    return protocol, sanity[sanity["protocol"] == protocol]


def audit_headline(sanity: pd.DataFrame) -> str:
    """The one line of notebook 06 for the index page: whether the judge called the method against
    itself a draw (the unbiased protocol's sanity check when it ran).
    """
    if sanity.empty:
        return "No pair was judged, so the judge could not be audited (see the failures)."
    protocol, rows = _headline_protocol(sanity)
    r = next(rows.itertuples(index=False))
    verdict = (
        "the judge reports a difference between two runs of the same method, a false finding"
        if r.supported
        else "no difference under the claim rule, as a fair judge must report"
    )
    return (
        f"Self-vs-self ({r.pair}, {protocol} protocol, {r.questions} questions): relative win rate of run A "
        f"{_rwr(r)}: {verdict}."
    )


def comparison_headline(sanity: pd.DataFrame) -> str:
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
    supported = int(rows["supported"].sum())
    return f"Relative win rate by the {protocol} judge: {'; '.join(pairs)}; " + (
        f"{supported} of {len(rows)} pair(s) differ under the claim rule."
        if supported
        else "no pair differs under the claim rule."
    )
