"""Notebook 12's findings: the figures its prose states that no other saved table holds as a row of
its own: where the simulated judge came from and what was set over it, the designs that are the
extremes of the simulated studies (the classic protocol's highest spurious-winner rate, the unbiased
protocol's highest and its lowest and highest coverage, its largest bias), the closed form beside
them, the recommended design's model time in hours, the normal model's largest gap to the simulated
rates and the targets. Each design a sentence names is given by its rows, one per column it states
(subject: the `calibration_summary` column).
"""

from __future__ import annotations

import pandas as pd

from ragtrial.config.calibration import CalibrationSettings
from ragtrial.evaluation.calibration.fit import JudgeFit
from ragtrial.evaluation.calibration.model import JudgeModel, true_relative_win_rate
from ragtrial.evaluation.calibration.studies import Scenario
from ragtrial.evaluation.findings import Finding, embedded_model_finding
from ragtrial.evaluation.run_findings import interval_level_finding

SUMMARY = "calibration_summary"
DESIGN = ("trials", "repeats", "questions")


def judge_findings(audit_run: str | None, fit: JudgeFit, settings: CalibrationSettings) -> list[Finding]:
    """Where the simulated judge comes from (1: fitted to the notebook-06 audit, the subject; 0: the
    model's defaults, the figure says why), and each parameter `calibration.parameters` set over it.
    """
    fitted = not fit.source
    return [
        Finding(
            "judge_fitted",
            "fitted to the notebook-06 audit" if fitted else fit.source,
            float(fitted),
            "audit_run" if fitted else "run.json",
            subject=audit_run or "",
        ),
        *[
            Finding(
                "parameter_set", "a simulated judge's parameter set in the settings", value, "run.json", name
            )
            for name, value in settings.parameters.items()
        ],
    ]


def scenario_findings(model: JudgeModel, effect: Scenario) -> list[Finding]:
    """The effect scenario: its true relative win rate for this judge, and the score difference on
    every aspect that gives it.
    """
    return [
        Finding(
            "effect_scenario",
            "true relative win rate of the effect scenario",
            true_relative_win_rate(model, effect.difference),
            "judge_model",
            "true_relative_win_rate",
        ),
        Finding(
            "effect_scenario",
            "score difference on every aspect",
            effect.difference[0],
            "judge_model",
            "difference",
        ),
    ]


def _summary_row(statement: str, row: pd.Series, columns: tuple[str, ...]) -> list[Finding]:
    """The `columns` of one `calibration_summary` row, a rate with its interval where the table has one."""
    return [
        Finding(
            statement,
            f"{column} of the {row['protocol']} protocol's design",
            float(row[column]),
            SUMMARY,
            column,
            ci_low=float(row[f"{column}_low"]) if f"{column}_low" in row else None,
            ci_high=float(row[f"{column}_high"]) if f"{column}_high" in row else None,
        )
        for column in columns
    ]


def study_findings(summary: pd.DataFrame, closed_form: float) -> list[Finding]:
    """The extremes of the simulated studies: on A/A, the classic protocol's highest winner rate (its
    questions, its first-shown winner share) and the unbiased protocol's; over the unbiased designs,
    the lowest coverage (its scenario as the figure, the truth as the value) and the highest, and on
    the effect scenario the largest bias with its Monte Carlo standard error; `closed_form`, the
    classic rate its position bias implies.
    """
    null = summary[summary["truth"] == 0]
    classic, unbiased_null = null[null["protocol"] == "classic"], null[null["protocol"] == "unbiased"]
    unbiased = summary[summary["protocol"] == "unbiased"]
    effect = unbiased[unbiased["truth"] != 0]
    rows = []
    if not classic.empty:
        worst = classic.loc[classic["winner_rate"].idxmax()]
        rows += _summary_row("classic_spurious", worst, ("winner_rate", "questions", "a_winner_rate"))
        rows.append(
            Finding(
                "classic_closed_form", "the classic winner rate in closed form", closed_form, "judge_model"
            )
        )
    if not unbiased_null.empty:
        top = unbiased_null.loc[unbiased_null["winner_rate"].idxmax()]
        rows += _summary_row("unbiased_spurious", top, ("winner_rate", *DESIGN))
    if not unbiased.empty:
        low = unbiased.loc[unbiased["coverage"].idxmin()]
        high = unbiased.loc[unbiased["coverage"].idxmax()]
        rows += _summary_row("coverage_lowest", low, ("coverage", *DESIGN))
        rows.append(
            Finding("coverage_lowest", str(low["scenario"]), float(low["truth"]), SUMMARY, "scenario")
        )
        rows += _summary_row("coverage_highest", high, ("coverage",))
    if not effect.empty:
        worst = effect.loc[effect["bias"].abs().idxmax()]
        rows += _summary_row("bias_largest", worst, ("truth", "bias", "bias_se", "trials", "repeats"))
    return rows


def design_findings(
    recommendation: pd.DataFrame, check: pd.DataFrame, settings: CalibrationSettings
) -> list[Finding]:
    """The targets, the chosen design's model time in hours (when it has one), and the largest gap
    between the normal model's winner rate and the simulated one at the simulated counts.
    """
    chosen = recommendation[recommendation["chosen"]]
    wall_s = chosen["wall_s"].iloc[0] if not chosen.empty else None
    rows = [
        Finding(
            "target",
            "true relative win rate to detect",
            settings.win_rate_difference,
            "run.json",
            "difference",
        ),
        Finding("target", "power", settings.target_power, "run.json", "power"),
        Finding("target", "false-winner rate", settings.target_false_winner, "run.json", "false_winner_rate"),
        # a design that never reaches the power says so "up to" this count (`recommendation.why_not`)
        Finding(
            "target", "largest question count considered", settings.max_questions, "run.json", "max_questions"
        ),
        Finding(
            "model_check_gap",
            "largest gap between the normal model's and the simulated winner rate",
            float((check["winner_rate"] - check["predicted_winner_rate"]).abs().max()),
            "design_check",
        ),
    ]
    if wall_s is not None and not pd.isna(wall_s):
        rows.append(
            Finding(
                "recommended_model_hours", "model time of the chosen design", wall_s / 3600, "recommendation"
            )
        )
    return rows


def calibration_findings(
    summary: pd.DataFrame,
    closed_form: float,
    recommendation: pd.DataFrame,
    check: pd.DataFrame,
    settings: CalibrationSettings,
    embedded: bool,
) -> list[Finding]:
    """Notebook 12's closing findings beside `judge_findings` and `scenario_findings`, which the
    notebook states before them.
    """
    return [
        interval_level_finding(),
        *study_findings(summary, closed_form),
        *design_findings(recommendation, check, settings),
        embedded_model_finding(embedded),
    ]
