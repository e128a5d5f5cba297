"""Notebook 12's findings (`evaluation.calibration.findings`) pick the extremes of hand-made study
summaries, and its narrative words them from the saved tables alone: every number it states is a
cell of those tables.
"""

from __future__ import annotations

import pandas as pd
import pytest
from traceable import untraced_numbers

from ragtrial.config.calibration import CalibrationSettings
from ragtrial.evaluation.calibration.findings import calibration_findings, judge_findings, scenario_findings
from ragtrial.evaluation.calibration.fit import PARAMETER_COLUMNS, JudgeFit
from ragtrial.evaluation.calibration.model import JudgeModel
from ragtrial.evaluation.calibration.studies import Scenario, scenario_table, scenarios
from ragtrial.evaluation.findings import findings_table, stated
from ragtrial.report.narrative.calibration import fit_note, narrate, studies_note

MODEL = JudgeModel(aspects=("comprehensiveness",))


def _study(scenario, protocol, trials, questions, truth, winner, coverage, bias, first=None):
    return {
        "scenario": scenario,
        "protocol": protocol,
        "trials": trials,
        "repeats": 1,
        "questions": questions,
        "truth": truth,
        "winner_rate": winner,
        "winner_rate_low": winner / 2,
        "winner_rate_high": (1 + winner) / 2,
        "a_winner_rate": winner if first is None else first,
        "coverage": coverage,
        "bias": bias,
        "bias_se": 0.01,
    }


SUMMARY = pd.DataFrame(
    [
        _study("A/A", "classic", 1, 8, 0.0, 0.25, 0.5, 0.0),
        _study("A/A", "classic", 1, 12, 0.0, 0.75, 0.25, 0.0),  # the classic protocol's worst
        _study("A/A", "unbiased", 2, 8, 0.0, 0.125, 0.875, 0.0),  # the unbiased protocol's worst
        _study("A/A", "unbiased", 3, 12, 0.0, 0.0, 1.0, 0.0),  # the highest coverage
        _study("A better", "unbiased", 2, 8, 0.1, 0.625, 0.75, -0.05),  # the lowest coverage
        _study("A better", "unbiased", 3, 12, 0.1, 0.875, 0.875, -0.025),
    ]
)
CHECK = pd.DataFrame({"winner_rate": [0.25, 0.5], "predicted_winner_rate": [0.2, 0.6]})
RECOMMENDATION = pd.DataFrame(
    [
        {"protocol": "classic", "trials": 1, "repeats": 1, "questions": None, "power": 0.3,
         "false_winner_rate": 0.7, "why_not": "false-winner rate 70% above 5%", "judge_calls": 100,
         "cost": None, "wall_s": 360.0, "chosen": False},
        {"protocol": "unbiased", "trials": 3, "repeats": 1, "questions": 40, "power": 0.81,
         "false_winner_rate": 0.012, "why_not": "", "judge_calls": 2400, "cost": 1234.5, "wall_s": 5400.0,
         "chosen": True},
    ]
)  # fmt: skip


def _tables(recommendation=RECOMMENDATION, source="", parameters=None, summary=SUMMARY):
    fit = JudgeFit(MODEL, pd.DataFrame(columns=PARAMETER_COLUMNS), pd.DataFrame(), source)
    settings = CalibrationSettings(parameters=parameters or {})
    findings = [
        *judge_findings("06-audit" if not source else None, fit, settings),
        *scenario_findings(MODEL, Scenario("A better", (0.25,))),
        *calibration_findings(summary, 0.375, recommendation, CHECK, settings, embedded=False),
    ]
    return {
        "findings": findings_table(findings),
        "recommendation": recommendation,
        "fitted_parameters": fit.parameters,
        "calibration_summary": summary,
        "design_check": CHECK,
    }


def test_the_findings_are_the_extremes_of_the_studies_and_the_chosen_designs_hours():
    findings = _tables()["findings"]
    assert stated(findings, "classic_spurious", "winner_rate")[["value", "ci_low", "ci_high"]].tolist() == [
        0.75,
        0.375,
        0.875,
    ]
    assert stated(findings, "classic_spurious", "questions").value == 12
    assert stated(findings, "unbiased_spurious", "trials").value == 2
    assert stated(findings, "coverage_lowest", "coverage").value == 0.75
    assert stated(findings, "coverage_lowest", "scenario").figure == "A better"
    assert stated(findings, "coverage_highest", "coverage").value == 1.0
    assert stated(findings, "bias_largest", "bias").value == -0.05  # the largest in size, sign kept
    assert stated(findings, "recommended_model_hours").value == 1.5
    assert stated(findings, "model_check_gap").value == pytest.approx(0.1)
    assert stated(findings, "judge_fitted", "06-audit").value == 1


def test_the_narrative_words_the_saved_tables_alone():
    tables = _tables()
    narration = narrate(tables)
    assert narration.headline == (
        "Calibration by simulation: this judge needs M = 3 trials and N = 1 repeat and 40 questions to "
        "detect a 10-point win-rate difference (81% power, 1.2% false winners); the classic protocol "
        "declared a winner in 75% of A/A studies."
    )
    text = narration.findings
    assert text.startswith("The simulated judge is fitted to the notebook-06 audit **06-audit**.")
    assert "declared a winner in 75% (95% interval 38%–88%) of the simulated studies at 12 questions" in text
    assert "closed form for this judge's position bias says 38%" in text
    assert (
        "highest spurious-winner rate is 12% (95% interval 6%–56%) (M = 2 trials and N = 1 repeat, 8" in text
    )
    assert "covered the truth in 75% to 100% of the studies (lowest: A better, M = 2 trials" in text
    assert "**The classic protocol manufactures winners**" in text and "above the 5% false-winner" in text
    assert "almost always the method it shows first (the method shown first won 75% of the studies)" in text
    assert (
        "off by -0.050 on average at worst (Monte Carlo standard error 0.010; M = 2 trials and N = 1 "
        "repeat): ties and per-call noise pull it toward zero" in text
    )
    assert "2,400 judge calls per method pair, 1,234.50 in the price settings' currency, about 1.5 h" in text
    assert "within 10% of the simulated winner rates" in text
    assert untraced_numbers(narration.headline + "\n" + text, tables) == []


def test_without_a_design_meeting_the_targets_the_narrative_says_why_and_names_the_defaults():
    refused = RECOMMENDATION.assign(chosen=False, why_not=["power stays below 80% up to 2000 questions", ""])
    tables = _tables(refused, source="the model's defaults (`calibration.fit_audit` is false)",
                     parameters={"position_bias": 0.3})  # fmt: skip
    narration = narrate(tables)
    assert "no simulated (M, N) detects a 10-point win-rate difference" in narration.headline
    assert "**No simulated design** detects" in narration.findings
    reason = "the classic protocol (one trial): power stays below 80% up to 2000 questions"
    assert reason in narration.findings
    assert stated(tables["findings"], "target", "max_questions").value == CalibrationSettings().max_questions
    assert untraced_numbers(narration.headline + "\n" + narration.findings, tables) == []
    note = fit_note(tables["fitted_parameters"], tables["findings"])
    assert note == (
        "The simulated judge is the model's defaults (`calibration.fit_audit` is false). "
        "Set over it (`calibration.parameters`): `position_bias` = 0.3."
    )


def test_the_studies_note_words_the_scenarios_table_and_its_numbers_are_its_cells():
    null, effect = scenarios(MODEL, 0.1, 20.0)
    table = scenario_table(MODEL, [null, effect], 40)
    assert list(table["studies"]) == [40, 40] and list(table["difference_points"])[0] == 0
    assert table["true_relative_win_rate"].iloc[1] == pytest.approx(0.1, abs=1e-6)
    note = studies_note(table)
    assert note == (
        "40 studies per scenario; true relative win rate of the effect scenario +0.10 "
        f"(a difference of {table['difference_points'].iloc[1]:.3f} points on every aspect)."
    )
    assert untraced_numbers(note, {"scenarios": table}) == []


def _with(rows: int | list[int], **changes) -> pd.DataFrame:
    summary = SUMMARY.copy()
    for column, value in changes.items():
        summary.loc[rows, column] = value
    return summary


@pytest.mark.parametrize(
    ("summary", "said", "not_said"),
    [
        pytest.param(
            _with([0, 1], winner_rate=0.04, winner_rate_low=0.01, winner_rate_high=0.045, a_winner_rate=0.04),
            "within the 5% false-winner rate the design targets",
            "manufactures winners",
            id="classic-rate-within-the-target",
        ),
        pytest.param(
            _with(1, winner_rate_low=0.03),
            "the interval includes the 5% false-winner rate the design targets, so these studies do not show",
            "**The classic protocol manufactures winners**",
            id="classic-interval-straddles-the-target",
        ),
        pytest.param(
            _with(1, a_winner_rate=0.25),
            "more often the method it shows second than the first (the method shown first won 25%",
            "shows first (",
            id="winners-mostly-shown-second",
        ),
        pytest.param(
            _with(1, a_winner_rate=0.5),
            "more often the method it shows first than the other (the method shown first won 50%",
            "almost always",
            id="winners-mostly-but-not-almost-always-first",
        ),
        pytest.param(
            _with(4, bias=0.05),
            "off by +0.050 on average at worst (Monte Carlo standard error 0.010; M = 2 trials and N = 1 "
            "repeat): away from zero, so it overstates the difference",
            "toward zero",
            id="bias-of-the-truth's-sign",
        ),
        pytest.param(
            _with([4, 5], bias=-0.015),
            "within two standard errors of zero, so the studies show no bias",
            "toward zero",
            id="bias-within-its-monte-carlo-error",
        ),
    ],
)
def test_the_protocol_sentences_follow_the_rates_and_signs(summary, said, not_said):
    tables = _tables(summary=summary)
    text = narrate(tables).findings
    assert said in text and not_said not in text, text
    assert untraced_numbers(text, tables) == []
