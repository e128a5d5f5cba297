"""What notebook 12 says of its simulated studies: where the judge came from, what each protocol does
with a known truth, and the design the targets need, worded from its saved tables (the rows of its
`findings` table, `evaluation.calibration.findings`, name the extremes of `calibration_summary`).
"""

from __future__ import annotations

import math

import pandas as pd

from ragtrial.evaluation.findings import FINDINGS_TABLE, answered_by_embedded_model, stated, statements
from ragtrial.report.narrative.common import embedded_disclaimer
from ragtrial.report.narrative.narration import Narration, SavedTables, saved


def _rate(rate: pd.Series, level: float) -> str:
    """A rate finding with its interval at `level`."""
    return f"{rate.value:.0%} ({level:.0%} interval {rate.ci_low:.0%}–{rate.ci_high:.0%})"


def _design(protocol: str, trials: float, repeats: float) -> str:
    if protocol == "classic":
        return "the classic protocol (one trial)"
    trials, repeats = int(trials), int(repeats)
    return f"M = {trials} trial{'s' * (trials != 1)} and N = {repeats} repeat{'s' * (repeats != 1)}"


def _stated_design(findings: pd.DataFrame, statement: str) -> str:
    """The unbiased design whose rows `statement` gives."""
    return _design(
        "unbiased", stated(findings, statement, "trials").value, stated(findings, statement, "repeats").value
    )


def _points(difference: float) -> str:
    """A relative win rate difference in points of win rate (0.10 -> "10-point")."""
    return f"{difference * 100:g}-point"


def studies_note(scenarios: pd.DataFrame) -> str:
    """How many studies each scenario ran and what the scenarios with a true difference truly are
    (the saved `scenarios` table).
    """
    parts = [
        f"true relative win rate of the effect scenario {row.true_relative_win_rate:+.2f} (a difference of "
        f"{row.difference_points:.3f} points "
        + ("on every aspect)" if row.uniform_difference else "on average over the aspects)")
        for row in scenarios[scenarios["difference_points"] != 0].itertuples(index=False)
    ]
    studies = ", ".join(str(n) for n in scenarios["studies"].unique())
    return "; ".join([f"{studies} studies per scenario", *parts]) + "."


def fit_note(parameters: pd.DataFrame, findings: pd.DataFrame) -> str:
    """Where the simulated judge's parameters come from (`fitted_parameters`, the `judge_fitted` and
    `parameter_set` findings), and which were not measured or were set.
    """
    judge = statements(findings, "judge_fitted").iloc[0]
    source = f"fitted to the notebook-06 audit **{judge.subject}**" if judge.value else judge.figure
    parts = [f"The simulated judge is {source}."]
    parts += [f"`{r.parameter}`: {r.note}." for r in parameters.itertuples(index=False) if r.note]
    overrides = statements(findings, "parameter_set")
    if not overrides.empty:
        parts.append(
            "Set over it (`calibration.parameters`): "
            + ", ".join(f"`{r.subject}` = {r.value:g}" for r in overrides.itertuples(index=False))
            + "."
        )
    return " ".join(parts)


def _first_shown_clause(findings: pd.DataFrame) -> str:
    """Which method the classic protocol's spurious winners were, from the A/A studies it declared a
    winner in (`winner_rate`) and those the method shown first won (`a_winner_rate`), both shares of
    the studies: "almost always" only when the first-shown won at least nine in ten of them.
    """
    winners = stated(findings, "classic_spurious", "winner_rate").value
    first = stated(findings, "classic_spurious", "a_winner_rate").value
    if winners == 0:
        return ""
    second = winners - first
    shown = f"the method shown first won {first:.0%} of the studies"
    if first >= 0.9 * winners:
        return f", almost always the method it shows first ({shown})"
    if first > second:
        return f", more often the method it shows first than the other ({shown})"
    if first < second:
        return f", more often the method it shows second than the first ({shown})"
    return f", as often the method it shows first as the other ({shown})"


def classic_spurious_sentence(findings: pd.DataFrame) -> str:
    """The paper's point as a number: how often the classic protocol declares a winner in A/A studies
    against the target false-winner rate ("manufactures winners" only when its interval lies above
    it), which method those winners were (and the closed form of its winner rate), beside the unbiased
    protocol's worst rate.
    """
    if statements(findings, "classic_spurious").empty:
        return ""
    rate = stated(findings, "classic_spurious", "winner_rate")
    level = stated(findings, "interval_level").value
    target = stated(findings, "target", "false_winner_rate").value
    studies = (
        f"{_rate(rate, level)} of the simulated studies at "
        f"{stated(findings, 'classic_spurious', 'questions').value:.0f} questions"
    )
    if rate.ci_low > target:
        text = (
            f"**The classic protocol manufactures winners**: with no true difference it declared a winner in "
            f"{studies}, above the {target:.0%} false-winner rate the design targets"
        )
    elif rate.ci_high <= target:
        text = (
            f"With no true difference the classic protocol declared a winner in {studies}, within the "
            f"{target:.0%} false-winner rate the design targets"
        )
    else:
        text = (
            f"With no true difference the classic protocol declared a winner in {studies}; the interval "
            f"includes the {target:.0%} false-winner rate the design targets, so these studies do not show "
            "it manufactures winners"
        )
    text += _first_shown_clause(findings)
    closed_form = statements(findings, "classic_closed_form")
    if not closed_form.empty:
        text += f"; the closed form for this judge's position bias says {closed_form['value'].iloc[0]:.0%}"
    if not statements(findings, "unbiased_spurious").empty:
        top = stated(findings, "unbiased_spurious", "winner_rate")
        text += (
            f". The unbiased protocol's highest spurious-winner rate is "
            f"{_rate(top, level)} ({_stated_design(findings, 'unbiased_spurious')}, "
            f"{stated(findings, 'unbiased_spurious', 'questions').value:.0f} questions)"
        )
    return text + "."


def _bias_clause(findings: pd.DataFrame) -> str:
    """The largest bias of the unbiased protocol's estimate, its Monte Carlo standard error, and its
    direction from the signs: toward zero (what ties and per-call noise do) or away from it; none
    when it lies within two standard errors of zero.
    """
    truth = stated(findings, "bias_largest", "truth").value
    bias = stated(findings, "bias_largest", "bias").value
    error = stated(findings, "bias_largest", "bias_se").value
    text = (
        f"; with a true relative win rate of {truth:+.2f} its estimate is off by {bias:+.3f} on average at "
        f"worst (Monte Carlo standard error {error:.3f}; {_stated_design(findings, 'bias_largest')})"
    )
    if not abs(bias) > 2 * error:  # a NaN error (one study) shows no bias either
        return text + ", within two standard errors of zero, so the studies show no bias"
    if truth * bias < 0 and abs(bias) <= abs(truth):
        return text + ": ties and per-call noise pull it toward zero"
    if truth * bias < 0:
        return text + ": past zero, to the other sign"
    return text + ": away from zero, so it overstates the difference"


def coverage_sentence(findings: pd.DataFrame) -> str:
    """The unbiased intervals' coverage of the truth, lowest and highest over the designs, and the bias."""
    if statements(findings, "coverage_lowest").empty:
        return ""
    low = stated(findings, "coverage_lowest", "coverage").value
    high = stated(findings, "coverage_highest", "coverage").value
    level = stated(findings, "interval_level").value
    text = (
        f"The unbiased protocol's {level:.0%} intervals covered the truth in {low:.0%} to "
        f"{high:.0%} of the studies (lowest: {stated(findings, 'coverage_lowest', 'scenario').figure}, "
        f"{_stated_design(findings, 'coverage_lowest')}, "
        f"{stated(findings, 'coverage_lowest', 'questions').value:.0f} questions)"
    )
    if not statements(findings, "bias_largest").empty:
        text += _bias_clause(findings)
    return text + "."


def _targets(findings: pd.DataFrame) -> tuple[float, float, float]:
    """The win-rate difference to detect, the target power and false-winner rate."""
    difference, power, false = (
        stated(findings, "target", t).value for t in ("difference", "power", "false_winner_rate")
    )
    return difference, power, false


def recommendation_sentence(recommendation: pd.DataFrame, findings: pd.DataFrame) -> str:
    """The smallest design meeting the targets, with its cost; or why none does."""
    difference, power, false = _targets(findings)
    chosen = recommendation[recommendation["chosen"]]
    if chosen.empty:
        reasons = "; ".join(
            f"{_design(r.protocol, r.trials, r.repeats)}: {r.why_not}"
            for r in recommendation.itertuples(index=False)
            if r.why_not
        )
        return (
            f"**No simulated design** detects a {_points(difference)} win-rate difference with {power:.0%} "
            f"power at a false-winner rate of at most {false:.0%} ({reasons}). More trials "
            "(`calibration.simulated_trials`) or a judge with less noise and trial variation are needed."
        )
    r = chosen.iloc[0]
    design = _design(r.protocol, r.trials, r.repeats)
    hours = statements(findings, "recommended_model_hours")
    cost = "" if r.cost is None or pd.isna(r.cost) else f", {r.cost:,.2f} in the price settings' currency"
    wall = "" if hours.empty else f", about {hours['value'].iloc[0]:.1f} h of model time"
    return (
        f"**This judge needs {design} and {int(r.questions)} questions** to detect a "
        f"{_points(difference)} win-rate difference with {r.power:.0%} power at a false-winner rate of "
        f"{r.false_winner_rate:.1%} (targets {power:.0%} and {false:.0%}): {int(r.judge_calls):,} judge "
        f"calls per method pair{cost}{wall}."
    )


def calibration_headline(recommendation: pd.DataFrame, findings: pd.DataFrame) -> str:
    """The one line of notebook 12 for the index page: the design this judge needs, and the classic
    protocol's spurious-winner rate.
    """
    difference, power, false = _targets(findings)
    chosen = recommendation[recommendation["chosen"]]
    if chosen.empty:
        need = (
            f"no simulated (M, N) detects a {_points(difference)} win-rate difference with {power:.0%} "
            f"power at <= {false:.0%} false winners"
        )
    else:
        r = chosen.iloc[0]
        design = _design(r.protocol, r.trials, r.repeats)
        need = (
            f"this judge needs {design} and {int(r.questions)} questions to detect a "
            f"{_points(difference)} win-rate difference ({r.power:.0%} power, "
            f"{r.false_winner_rate:.1%} false winners)"
        )
    spurious = (
        f"; the classic protocol declared a winner in "
        f"{stated(findings, 'classic_spurious', 'winner_rate').value:.0%} of A/A studies"
        if not statements(findings, "classic_spurious").empty
        else ""
    )
    return f"Calibration by simulation: {need}{spurious}."


def calibration_findings(
    parameters: pd.DataFrame, recommendation: pd.DataFrame, findings: pd.DataFrame
) -> str:
    """The closing Markdown: the judge, each protocol against the truth, the design, and how far the
    normal model that extrapolates in questions is from the simulated rates.
    """
    parts = [
        fit_note(parameters, findings),
        classic_spurious_sentence(findings),
        coverage_sentence(findings),
        recommendation_sentence(recommendation, findings),
    ]
    gap = stated(findings, "model_check_gap").value
    if math.isfinite(gap):
        parts.append(
            f"The question counts beyond the simulated ones come from a normal model of the claim rule's two "
            f"statistics, fitted to the studies; at the simulated counts it is within {gap:.0%} of the "
            "simulated winner rates (table above)."
        )
    if answered_by_embedded_model(findings):
        parts.append(
            embedded_disclaimer("The judge's fitted parameters")
            + " The protocols' behaviour for a judge with these parameters is what the simulation shows."
        )
    return "\n\n".join(p for p in parts if p)


def narrate(tables: SavedTables) -> Narration:
    """Notebook 12's headline and closing findings, from its saved tables alone."""
    recommendation, findings = saved(tables, "recommendation"), saved(tables, FINDINGS_TABLE)
    return Narration(
        calibration_headline(recommendation, findings),
        calibration_findings(saved(tables, "fitted_parameters"), recommendation, findings),
    )
