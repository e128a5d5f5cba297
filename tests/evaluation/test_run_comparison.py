"""Two runs compared measure by measure (`evaluation.run_comparison`): paired differences and their
intervals against hand-computed values, the test each measure's kind calls for, Holm over the family,
the refusal of runs that asked other questions, the unpaired path and the flipped questions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from ragtrial.evaluation.run_comparison import (
    COMPARISON_COLUMNS,
    RIGHT_TO_WRONG,
    WRONG_TO_RIGHT,
    comparison_rows,
    flipped_questions,
    with_claims,
)
from ragtrial.stats import holm_correction

BINARY = {"qa_accuracy": True, "qa_f1": False}
NAMES = ("run-a", "run-b")


def observed(measure: str, values: list[float], method: str = "hybrid", status=None) -> pd.DataFrame:
    """One run's observations of a measure, questions q0, q1, ... in order."""
    n = len(values)
    return pd.DataFrame(
        {
            "measure": measure,
            "question_id": [f"q{i}" for i in range(n)],
            "question_type": ["single_hop", "multi_hop"] * (n // 2) + ["single_hop"] * (n % 2),
            "method": method,
            "partner": "",
            "value": values,
            "status": status or ["ok"] * n,
        }
    )


ACC_A = [1, 1, 1, 1, 0, 0, 0, 1, 1, 0]
ACC_B = [1, 0, 1, 1, 1, 1, 1, 1, 1, 1]  # q1 right -> wrong; q4, q5, q6, q9 wrong -> right
F1_A = [0.1, 0.5, 0.3, 0.9, 0.2, 0.4, 0.6, 0.7, 0.0, 0.3]
F1_B = [0.3, 0.4, 0.6, 0.9, 0.6, 0.9, 0.8, 0.8, 0.5, 0.6]


def runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    first = pd.concat([observed("qa_accuracy", ACC_A), observed("qa_f1", F1_A)], ignore_index=True)
    second = pd.concat([observed("qa_accuracy", ACC_B), observed("qa_f1", F1_B)], ignore_index=True)
    return first, second


def test_paired_differences_tests_and_holm_match_hand_computed_values():
    first, second = runs()
    table = with_claims(comparison_rows(first, second, BINARY, NAMES, n_resamples=4000, seed=3))
    assert list(table.columns) == COMPARISON_COLUMNS
    accuracy = table.set_index("measure").loc["qa_accuracy"]
    assert (accuracy["first_run"], accuracy["second_run"], accuracy["pairing"]) == (
        "run-a",
        "run-b",
        "paired",
    )
    assert accuracy["n"] == 10
    assert accuracy["first_mean"] == pytest.approx(0.6) and accuracy["second_mean"] == pytest.approx(0.9)
    assert accuracy["mean_diff"] == pytest.approx(0.3)  # (4 - 1) / 10
    assert (accuracy["wins"], accuracy["losses"], accuracy["ties"]) == (4, 1, 5)
    # McNemar, exact below 25 discordant pairs: 1 of 5 discordant one way, binomial(5, 1/2) two-sided
    assert accuracy["test"] == "exact binomial"
    assert accuracy["p_value"] == pytest.approx(scipy_stats.binomtest(1, 5, 0.5).pvalue)
    assert accuracy["p_value"] == pytest.approx(0.375)
    # the interval is the percentile bootstrap of the per-question differences
    diffs = np.array(ACC_B) - np.array(ACC_A)
    means = diffs[np.random.default_rng(3).integers(0, 10, size=(4000, 10))].mean(axis=1)
    assert (accuracy["ci_low"], accuracy["ci_high"]) == pytest.approx(
        tuple(np.quantile(means, [0.025, 0.975]))
    )

    f1 = table.set_index("measure").loc["qa_f1"]
    assert f1["mean_diff"] == pytest.approx(np.mean(np.array(F1_B) - np.array(F1_A)))
    assert f1["test"] == "wilcoxon"
    assert f1["p_value"] == pytest.approx(scipy_stats.wilcoxon(F1_B, F1_A).pvalue)
    # Holm over the family: both rows
    expected = holm_correction([accuracy["p_value"], f1["p_value"]])["p_holm"].tolist()
    assert table["p_holm"].tolist() == pytest.approx(expected)
    assert f1["supported"] == (f1["ci_low"] > 0 and f1["p_holm"] <= 0.05)
    assert not accuracy["supported"] and "no claim" in accuracy["claim"]
    if f1["supported"]:
        assert f1["claim"] == "hybrid's qa_f1 is higher in run-b than in run-a"


def test_holm_runs_over_every_pair_of_a_comparison_of_three_runs():
    first, second = runs()
    rows = pd.concat(
        [
            comparison_rows(first, second, BINARY, ("a", "b"), n_resamples=200),
            comparison_rows(first, first, BINARY, ("a", "c"), n_resamples=200),
        ],
        ignore_index=True,
    )
    table = with_claims(rows)
    assert len(table) == 4
    assert table["p_holm"].tolist() == pytest.approx(
        holm_correction(rows["p_value"].tolist())["p_holm"].tolist()
    )
    same = table[table["second_run"] == "c"]
    assert (same["mean_diff"] == 0).all() and (same["p_value"] == 1).all()


def test_only_questions_both_runs_scored_are_paired_and_a_failed_answer_is_not_a_zero():
    first = observed("qa_accuracy", ACC_A)
    status = ["ok"] * 9 + ["answer failed: timeout"]
    second = observed("qa_accuracy", [*ACC_B[:9], np.nan], status=status)
    row = with_claims(comparison_rows(first, second, BINARY, NAMES, n_resamples=200)).iloc[0]
    assert row["n"] == 9
    assert row["mean_diff"] == pytest.approx((sum(ACC_B[:9]) - sum(ACC_A[:9])) / 9)


def test_runs_that_asked_other_questions_are_refused_naming_the_measure_and_counts():
    first = observed("qa_accuracy", ACC_A)
    second = observed("qa_accuracy", ACC_B[:8])
    with pytest.raises(ValueError, match="qa_accuracy: 2 questions only in run-a, 0 only in run-b, 8 shared"):
        with_claims(comparison_rows(first, second, BINARY, NAMES))


def test_unpaired_runs_use_fisher_and_mann_whitney_on_each_runs_own_answers():
    first = pd.concat([observed("qa_accuracy", ACC_A), observed("qa_f1", F1_A)], ignore_index=True)
    second = pd.concat([observed("qa_accuracy", ACC_B[:8]), observed("qa_f1", F1_B[:8])], ignore_index=True)
    table = with_claims(
        comparison_rows(first, second, BINARY, NAMES, paired=False, n_resamples=500)
    ).set_index("measure")
    accuracy, f1 = table.loc["qa_accuracy"], table.loc["qa_f1"]
    assert accuracy["pairing"] == "unpaired (10 vs 8 answers)" and accuracy["n"] == 8
    assert accuracy["mean_diff"] == pytest.approx(np.mean(ACC_B[:8]) - np.mean(ACC_A))
    assert accuracy["test"] == "fisher exact"
    table_2x2 = [[sum(ACC_B[:8]), 8 - sum(ACC_B[:8])], [sum(ACC_A), 10 - sum(ACC_A)]]
    assert accuracy["p_value"] == pytest.approx(scipy_stats.fisher_exact(table_2x2).pvalue)
    assert f1["test"] == "mann-whitney u"
    assert f1["p_value"] == pytest.approx(
        scipy_stats.mannwhitneyu(F1_B[:8], F1_A, alternative="two-sided").pvalue
    )
    assert pd.isna(f1["wins"])  # no pairs, no wins
    assert accuracy["ci_low"] <= accuracy["mean_diff"] <= accuracy["ci_high"]


def test_flipped_questions_are_listed_both_ways_for_0_1_measures_only():
    first, second = runs()
    flips = flipped_questions(first, second, BINARY, NAMES)
    assert set(flips["measure"]) == {"qa_accuracy"}
    assert flips.loc[flips["flip"] == RIGHT_TO_WRONG, "question_id"].tolist() == ["q1"]
    assert flips.loc[flips["flip"] == WRONG_TO_RIGHT, "question_id"].tolist() == ["q4", "q5", "q6", "q9"]
    assert set(flips["first_run"]) == {"run-a"} and set(flips["second_run"]) == {"run-b"}
