"""What notebook 12 says of its simulated studies: where the judge came from, what each protocol does
with a known truth, and the design the targets need, generated from the numbers.
"""

from __future__ import annotations

import math

import pandas as pd

from ragtrial.evaluation.calibration.fit import JudgeFit
from ragtrial.report.narrative.common import embedded_disclaimer


def _rate(value: float, low: float, high: float) -> str:
    return f"{value:.0%} (95% interval {low:.0%}–{high:.0%})"


def _design(row: pd.Series | tuple) -> str:
    if row.protocol == "classic":
        return "the classic protocol (one trial)"
    trials, repeats = int(row.trials), int(row.repeats)
    return f"M = {trials} trial{'s' * (trials != 1)} and N = {repeats} repeat{'s' * (repeats != 1)}"


def _points(difference: float) -> str:
    """A relative win rate difference in points of win rate (0.10 -> "10-point")."""
    return f"{difference * 100:g}-point"


def fit_note(audit_run: str | None, fit: JudgeFit, overrides: dict[str, float]) -> str:
    """Where the simulated judge's parameters come from, and which were not measured or were set."""
    source = fit.source or f"fitted to the notebook-06 audit **{audit_run}**"
    parts = [f"The simulated judge is {source}."]
    parts += [f"`{r.parameter}`: {r.note}." for r in fit.parameters.itertuples(index=False) if r.note]
    if overrides:
        parts.append(
            "Set over it (`calibration.parameters`): "
            + ", ".join(f"`{k}` = {v:g}" for k, v in overrides.items())
            + "."
        )
    return " ".join(parts)


def classic_spurious_sentence(summary: pd.DataFrame, closed_form: float | None) -> str:
    """The paper's point as a number: how often the classic protocol declares a winner in A/A studies
    (and the closed form of its first-shown rate), beside the unbiased protocol's worst rate.
    """
    null = summary[summary["truth"] == 0]
    classic = null[null["protocol"] == "classic"]
    unbiased = null[null["protocol"] == "unbiased"]
    if classic.empty:
        return ""
    worst = classic.loc[classic["winner_rate"].idxmax()]
    text = (
        f"**The classic protocol manufactures winners**: with no true difference it declared a winner in "
        f"{_rate(worst.winner_rate, worst.winner_rate_low, worst.winner_rate_high)} of the simulated "
        f"studies at {worst.questions} questions, almost always the method it shows first "
        f"({worst.a_winner_rate:.0%})"
    )
    if closed_form is not None:
        text += f"; the closed form for this judge's position bias says {closed_form:.0%}"
    if not unbiased.empty:
        top = unbiased.loc[unbiased["winner_rate"].idxmax()]
        text += (
            f". The unbiased protocol's highest spurious-winner rate is "
            f"{_rate(top.winner_rate, top.winner_rate_low, top.winner_rate_high)} ({_design(top)}, "
            f"{top.questions} questions)"
        )
    return text + "."


def coverage_sentence(summary: pd.DataFrame) -> str:
    """The unbiased intervals' coverage of the truth, lowest and highest over the designs, and the bias."""
    unbiased = summary[summary["protocol"] == "unbiased"]
    if unbiased.empty:
        return ""
    low, high = unbiased.loc[unbiased["coverage"].idxmin()], unbiased.loc[unbiased["coverage"].idxmax()]
    effect = unbiased[unbiased["truth"] != 0]
    text = (
        f"The unbiased protocol's 95% intervals covered the truth in {low.coverage:.0%} to "
        f"{high.coverage:.0%} of the studies (lowest: {low.scenario}, {_design(low)}, {low.questions} "
        "questions)"
    )
    if not effect.empty:
        worst = effect.loc[effect["bias"].abs().idxmax()]
        text += (
            f"; with a true relative win rate of {worst.truth:+.2f} its estimate is off by {worst.bias:+.3f} "
            f"on average at worst ({_design(worst)}): ties and per-call noise pull it toward zero"
        )
    return text + "."


def recommendation_sentence(
    recommendation: pd.DataFrame, difference: float, power: float, false: float
) -> str:
    """The smallest design meeting the targets, with its cost; or why none does."""
    chosen = recommendation[recommendation["chosen"]]
    if chosen.empty:
        reasons = "; ".join(
            f"{_design(r)}: {r.why_not}" for r in recommendation.itertuples(index=False) if r.why_not
        )
        return (
            f"**No simulated design** detects a {_points(difference)} win-rate difference with {power:.0%} "
            f"power at a false-winner rate of at most {false:.0%} ({reasons}). More trials "
            "(`calibration.simulated_trials`) or a judge with less noise and trial variation are needed."
        )
    r = chosen.iloc[0]
    cost = "" if r.cost is None or pd.isna(r.cost) else f", {r.cost:,.2f} in the price settings' currency"
    wall = "" if r.wall_s is None or pd.isna(r.wall_s) else f", about {r.wall_s / 3600:.1f} h of model time"
    return (
        f"**This judge needs {_design(r)} and {int(r.questions)} questions** to detect a "
        f"{_points(difference)} win-rate difference with {r.power:.0%} power at a false-winner rate of "
        f"{r.false_winner_rate:.1%} (targets {power:.0%} and {false:.0%}): {int(r.judge_calls):,} judge "
        f"calls per method pair{cost}{wall}."
    )


def calibration_headline(
    recommendation: pd.DataFrame, summary: pd.DataFrame, difference: float, power: float, false: float
) -> str:
    """The one line of notebook 12 for the index page: the design this judge needs, and the classic
    protocol's spurious-winner rate.
    """
    chosen = recommendation[recommendation["chosen"]]
    if chosen.empty:
        need = (
            f"no simulated (M, N) detects a {_points(difference)} win-rate difference with {power:.0%} "
            f"power at <= {false:.0%} false winners"
        )
    else:
        r = chosen.iloc[0]
        need = (
            f"this judge needs {_design(r)} and {int(r.questions)} questions to detect a "
            f"{_points(difference)} win-rate difference ({r.power:.0%} power, "
            f"{r.false_winner_rate:.1%} false winners)"
        )
    null = summary[(summary["truth"] == 0) & (summary["protocol"] == "classic")]
    spurious = (
        f"; the classic protocol declared a winner in {null['winner_rate'].max():.0%} of A/A studies"
        if not null.empty
        else ""
    )
    return f"Calibration by simulation: {need}{spurious}."


def calibration_findings(
    fit: str, classic: str, coverage: str, recommendation: str, check_gap: float, embedded: bool
) -> str:
    """The closing Markdown: the judge, each protocol against the truth, the design, and how far the
    normal model that extrapolates in questions is from the simulated rates.
    """
    parts = [fit, classic, coverage, recommendation]
    if math.isfinite(check_gap):
        parts.append(
            f"The question counts beyond the simulated ones come from a normal model of the claim rule's two "
            f"statistics, fitted to the studies; at the simulated counts it is within {check_gap:.0%} of the "
            "simulated winner rates (table above)."
        )
    if embedded:
        parts.append(
            embedded_disclaimer("The judge's fitted parameters")
            + " The protocols' behaviour for a judge with these parameters is what the simulation shows."
        )
    return "\n\n".join(p for p in parts if p)
