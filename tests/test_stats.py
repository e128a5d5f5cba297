"""Tests for ragtrial.stats; expected values are computed by hand (see comments), not by the code tested."""

import math

import numpy as np
import pandas as pd
import pytest
from matplotlib import cbook
from scipy import integrate
from scipy import stats as scipy_stats

from ragtrial.stats import (
    BoxStats,
    Interval,
    bootstrap_mean_ci,
    bootstrap_relative_win_rate,
    box_stats,
    claim_supported,
    claim_text,
    complementarity,
    detectable_from_interval,
    holm_correction,
    latency_summary,
    majority_verdict,
    mcnemar_test,
    minimum_detectable_difference,
    p95,
    paired_bootstrap_diff,
    paired_comparison_table,
    paired_power,
    paired_t,
    paired_test,
    pareto_front,
    power_analysis,
    questions_needed,
    relative_win_rate,
    summary_by_group,
    trial_win_rates,
    wilcoxon_signed_rank,
    win_tie_loss,
)

# --------------------------------------------------------------------------- bootstrap intervals


def test_bootstrap_ci_covers_true_mean_and_is_deterministic():
    values = np.random.default_rng(123).normal(3.0, 1.0, size=200)
    ci = bootstrap_mean_ci(values, seed=7)
    assert ci.n == 200
    assert ci.mean == pytest.approx(values.mean())
    assert ci.low < 3.0 < ci.high
    # 95% normal-theory width is 2 * 1.96 / sqrt(200) ~= 0.277
    assert 0.2 < ci.high - ci.low < 0.35
    assert bootstrap_mean_ci(values, seed=7) == ci
    assert bootstrap_mean_ci(values, seed=8) != ci


def test_bootstrap_ci_coverage_is_near_nominal():
    rng = np.random.default_rng(0)
    hits = 0
    for i in range(200):
        ci = bootstrap_mean_ci(rng.normal(0.0, 1.0, size=50), n_resamples=500, seed=i)
        hits += ci.low <= 0.0 <= ci.high
    assert 0.88 <= hits / 200 <= 0.99


def test_bootstrap_ci_nan_raises_with_count():
    with pytest.raises(ValueError, match="2 NaN of 4"):
        bootstrap_mean_ci([1.0, np.nan, 2.0, np.nan])


def test_bootstrap_ci_empty_raises():
    with pytest.raises(ValueError, match="empty"):
        bootstrap_mean_ci([])


def test_paired_bootstrap_identical_arrays_gives_zero_width_interval_at_zero():
    a = np.random.default_rng(1).normal(size=30)
    assert paired_bootstrap_diff(a, a.copy()) == Interval(0.0, 0.0, 0.0, 30)


def test_paired_bootstrap_resamples_questions_jointly():
    # b spreads widely across questions but a - b is exactly 0.5 everywhere: a joint resample
    # gives a point interval, an independent resample of a and b would not.
    b = np.random.default_rng(2).normal(0.0, 10.0, size=40)
    ci = paired_bootstrap_diff(b + 0.5, b)
    assert ci.low == pytest.approx(0.5) and ci.high == pytest.approx(0.5)


def test_paired_bootstrap_length_mismatch_raises():
    with pytest.raises(ValueError, match="3 vs 2"):
        paired_bootstrap_diff([1, 2, 3], [1, 2])


# --------------------------------------------------------------------------- McNemar


def _pairs(b01: int, b10: int, both: int = 0, neither: int = 0) -> tuple[np.ndarray, np.ndarray]:
    a = [False] * b01 + [True] * b10 + [True] * both + [False] * neither
    b = [True] * b01 + [False] * b10 + [True] * both + [False] * neither
    return np.array(a), np.array(b)


def test_mcnemar_exact_small():
    # 7 discordant, b01=1: p = 2 * (C(7,0) + C(7,1)) / 2^7 = 16/128
    res = mcnemar_test(*_pairs(1, 6, both=3, neither=2))
    assert (res.b01, res.b10) == (1, 6)
    assert res.method == "exact binomial"
    assert res.statistic == 1.0
    assert res.p_value == pytest.approx(0.125)


def test_mcnemar_exact_at_24_discordant():
    # p = 2 * sum_{k<=5} C(24,k) / 2^24 = 2 * 55455 / 16777216
    res = mcnemar_test(*_pairs(5, 19))
    assert res.method == "exact binomial"
    assert res.p_value == pytest.approx(2 * sum(math.comb(24, k) for k in range(6)) / 2**24)
    assert res.p_value == pytest.approx(110910 / 16777216)


def test_mcnemar_chi_square_from_25_discordant():
    # (|5 - 20| - 1)^2 / 25 = 7.84; chi2(1) survival = erfc(sqrt(x / 2))
    res = mcnemar_test(*_pairs(5, 20, both=10))
    assert res.method == "chi-square, continuity corrected"
    assert res.statistic == pytest.approx(7.84)
    assert res.p_value == pytest.approx(math.erfc(math.sqrt(7.84 / 2)))


def test_mcnemar_chi_square_hand_value():
    # (|10 - 25| - 1)^2 / 35 = 196 / 35 = 5.6 -> p ~= 0.01796
    res = mcnemar_test(*_pairs(10, 25))
    assert res.statistic == pytest.approx(5.6)
    assert res.p_value == pytest.approx(0.017960, abs=1e-5)


def test_mcnemar_no_discordant_pairs():
    res = mcnemar_test(*_pairs(0, 0, both=4, neither=3))
    assert (res.b01, res.b10, res.p_value) == (0, 0, 1.0)


def test_mcnemar_rejects_non_binary_input():
    with pytest.raises(ValueError, match="0/1"):
        mcnemar_test([0, 1, 2], [0, 1, 1])


# --------------------------------------------------------------------------- Wilcoxon / t


def test_wilcoxon_all_positive_exact():
    # 6 positive differences, no ties: exact two-sided p = 2 / 2^6
    res = wilcoxon_signed_rank([1, 2, 3, 4, 5, 6.5], [0] * 6)
    assert (res.statistic, res.n_nonzero, res.method) == (0.0, 6, "wilcoxon")
    assert res.p_value == pytest.approx(0.03125)


def test_wilcoxon_mixed_signs_exact():
    # differences 1, -2, 3, 4, 5 -> W- = 2; subsets of {1..5} with sum <= 2: {}, {1}, {2} -> p = 2*3/32
    res = wilcoxon_signed_rank([1, 0, 3, 4, 5], [0, 2, 0, 0, 0])
    assert res.statistic == 2.0
    assert res.p_value == pytest.approx(6 / 32)


def test_wilcoxon_drops_zero_differences():
    res = wilcoxon_signed_rank([1, 2, 3, 4, 5, 6.5, 7, 8], [0, 0, 0, 0, 0, 0, 7, 8])
    assert res.n_nonzero == 6
    assert res.p_value == pytest.approx(0.03125)


def test_wilcoxon_all_zero_differences():
    res = wilcoxon_signed_rank([1, 2, 3], [1, 2, 3])
    assert res.p_value == 1.0 and res.n_nonzero == 0
    assert "all differences zero" in res.method


def test_paired_t_hand_value():
    # d = 1,2,3,4: mean 2.5, sd sqrt(5/3), t = 2.5 / (sd / 2) = sqrt(15); for 3 df the two-sided
    # p = 1 - (2/pi) * (atan(u) + u / (1 + u^2)) with u = t / sqrt(3) = sqrt(5)
    res = paired_t([2, 4, 6, 8], [1, 2, 3, 4])
    u = math.sqrt(5)
    assert res.statistic == pytest.approx(math.sqrt(15))
    assert res.p_value == pytest.approx(1 - 2 / math.pi * (math.atan(u) + u / (1 + u * u)))
    assert res.method == "paired t"


def test_paired_t_all_zero_differences():
    assert paired_t([1, 2], [1, 2]).p_value == 1.0


def test_paired_test_picks_t_for_normal_differences():
    rng = np.random.default_rng(5)
    b = rng.normal(size=40)
    res = paired_test(b + rng.normal(0.3, 1.0, size=40), b)
    assert res.method.startswith("paired t (shapiro p=")


def test_paired_test_picks_wilcoxon_for_skewed_differences():
    rng = np.random.default_rng(5)
    diff = rng.exponential(1.0, size=40) ** 3
    res = paired_test(diff, np.zeros(40))
    assert res.method.startswith("wilcoxon (shapiro p=")
    assert res.p_value == wilcoxon_signed_rank(diff, np.zeros(40)).p_value


def test_paired_test_small_n_uses_wilcoxon():
    res = paired_test([1, 2, 3, 4, 5, 6.5], [0] * 6)
    assert res.method == "wilcoxon (n < 8)"
    assert res.p_value == pytest.approx(0.03125)


def test_paired_test_all_zero_differences():
    res = paired_test(np.ones(10), np.ones(10))
    assert res.p_value == 1.0 and "constant differences" in res.method


# --------------------------------------------------------------------------- Holm


def test_holm_brief_table():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04; running max -> 0.06
    table = holm_correction([0.01, 0.04, 0.03, 0.005])
    assert table["name"].tolist() == ["0", "1", "2", "3"]
    assert table["p_raw"].tolist() == [0.01, 0.04, 0.03, 0.005]
    np.testing.assert_allclose(table["p_holm"], [0.03, 0.06, 0.06, 0.02])
    assert table["reject"].tolist() == [True, False, False, True]


def test_holm_mapping_keeps_names_and_order():
    # sorted c=0.01*3=0.03, a=0.02*2=0.04, b=0.5*1=0.5
    table = holm_correction({"a": 0.02, "b": 0.5, "c": 0.01})
    assert table["name"].tolist() == ["a", "b", "c"]
    np.testing.assert_allclose(table["p_holm"], [0.04, 0.5, 0.03])


def test_holm_enforces_monotonicity():
    # 0.04 * 2 = 0.08 > 0.041 * 1 -> the larger p inherits 0.08 (as statsmodels' multipletests 'holm')
    np.testing.assert_allclose(holm_correction([0.04, 0.041])["p_holm"], [0.08, 0.08])


def test_holm_caps_at_one():
    # sorted 0.3*3=0.9, 0.6*2=1.2, 0.9*1=0.9 -> running max 0.9, 1.2, 1.2 -> capped 0.9, 1, 1
    table = holm_correction([0.3, 0.6, 0.9])
    np.testing.assert_allclose(table["p_holm"], [0.9, 1.0, 1.0])
    assert not table["reject"].any()


def test_holm_alpha_changes_rejections():
    assert holm_correction([0.01, 0.04, 0.03, 0.005], alpha=0.1)["reject"].tolist() == [True] * 4


def test_a_holm_p_of_exactly_alpha_rejects_in_the_table_and_supports_the_claim():
    # 0.025 * 2 comparisons = 0.05 exactly (doubling a float is exact): the table and the claim rule
    # apply the one rule, p_holm <= alpha, so both reject; just above alpha neither does
    table = holm_correction([0.025, 0.5])
    assert table["p_holm"].iloc[0] == 0.05 and table["reject"].tolist() == [True, False]
    assert claim_supported(0.1, 0.3, table["p_holm"].iloc[0]) is True
    assert claim_text(0.1, 0.3, table["p_holm"].iloc[0], "A is better") == "A is better"
    above = holm_correction([0.02500001, 0.5])
    assert not above["reject"].iloc[0] and not claim_supported(0.1, 0.3, above["p_holm"].iloc[0])
    assert "above 0.05" in claim_text(0.1, 0.3, above["p_holm"].iloc[0], "A is better")


@pytest.mark.parametrize("bad", [[0.1, np.nan], [0.1, 1.2], [-0.1]])
def test_holm_rejects_invalid_p_values(bad):
    with pytest.raises(ValueError):
        holm_correction(bad)


# --------------------------------------------------------------------------- complementarity


def test_complementarity_counts_and_shares():
    result = complementarity([1, 1, 0, 0, 1], [1, 0, 1, 0, 0])
    assert {k: v["count"] for k, v in result.items()} == {"only_a": 2, "only_b": 1, "both": 1, "neither": 1}
    assert {k: v["share"] for k, v in result.items()} == {
        "only_a": 0.4,
        "only_b": 0.2,
        "both": 0.2,
        "neither": 0.2,
    }


# --------------------------------------------------------------------------- tables


def _long(columns: dict[str, list[float]]) -> pd.DataFrame:
    wide = pd.DataFrame(columns, index=pd.Index([f"q{i}" for i in range(len(next(iter(columns.values()))))]))
    return (
        wide.rename_axis("question_id")
        .reset_index()
        .melt("question_id", var_name="method", value_name="score")
    )


def test_paired_comparison_table_binary():
    # 40 questions; graph right where rag wrong on 12, wrong where rag right on 2
    rag = [0] * 12 + [1] * 2 + [1] * 16 + [0] * 10
    graph = [1] * 12 + [0] * 2 + [1] * 16 + [0] * 10
    table = paired_comparison_table(_long({"rag": rag, "graph": graph, "clone": rag}), "rag", binary=True)
    assert table["method"].tolist() == ["graph", "clone"]
    graph_row, clone_row = table.iloc[0], table.iloc[1]
    assert (graph_row.wins, graph_row.losses, graph_row.ties, graph_row.n) == (12, 2, 26, 40)
    assert graph_row.mean_diff == pytest.approx(10 / 40)
    assert graph_row.test == "exact binomial"
    # 14 discordant, min 2: p = 2 * (1 + 14 + 91) / 2^14; Holm over (p, 1.0) doubles the smaller
    p = 2 * 106 / 2**14
    assert graph_row.p_value == pytest.approx(p)
    np.testing.assert_allclose(table["p_holm"], [2 * p, 1.0])
    assert table["supported"].tolist() == [True, False]
    assert (clone_row.ci_low, clone_row.ci_high) == (0.0, 0.0)


def test_paired_comparison_table_continuous_uses_wilcoxon():
    rng = np.random.default_rng(3)
    base = rng.uniform(size=30)
    scores = _long(
        {"rag": list(base), "graph": list(base + 0.2), "noise": list(base + rng.normal(0, 0.2, 30))}
    )
    table = paired_comparison_table(scores, "rag", binary=False).set_index("method")
    assert (table["test"] == "wilcoxon").all()
    assert table.loc["graph", "p_value"] == pytest.approx(wilcoxon_signed_rank(base + 0.2, base).p_value)
    assert table.loc["graph", "wins"] == 30
    assert bool(table.loc["graph", "supported"])


def test_paired_comparison_table_refuses_gaps_duplicates_nan_and_unknown_baseline():
    scores = _long({"rag": [1, 0, 1], "graph": [1, 1, 0]})
    with pytest.raises(ValueError, match="lack scores"):
        paired_comparison_table(scores.iloc[:-1], "rag", binary=True)
    with pytest.raises(ValueError, match="duplicate"):
        paired_comparison_table(pd.concat([scores, scores.iloc[:1]]), "rag", binary=True)
    with pytest.raises(ValueError, match="1 NaN"):
        paired_comparison_table(scores.assign(score=[1, np.nan, 1, 1, 1, 0]), "rag", binary=True)
    with pytest.raises(ValueError, match="baseline"):
        paired_comparison_table(scores, "naive", binary=True)


def test_summary_by_group():
    scores = pd.DataFrame(
        {
            "method": ["rag"] * 4 + ["graph"] * 4,
            "question_type": ["bridge", "bridge", "compare", "compare"] * 2,
            "score": [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0],
        }
    )
    per_method = summary_by_group(scores, "method", "score")
    assert per_method["method"].tolist() == ["rag", "graph"]
    np.testing.assert_allclose(per_method["mean"], [0.75, 0.25])
    assert per_method["n"].tolist() == [4, 4]
    assert (per_method["ci_low"] <= per_method["mean"]).all() and (
        per_method["mean"] <= per_method["ci_high"]
    ).all()
    cells = summary_by_group(scores, ["method", "question_type"], "score").set_index(
        ["method", "question_type"]
    )
    assert cells.loc[("rag", "bridge"), "mean"] == 0.5
    assert cells.loc[("graph", "compare"), "mean"] == 0.5
    assert len(cells) == 4
    with pytest.raises(ValueError, match="NaN"):
        summary_by_group(scores.assign(score=np.nan), "method", "score")


# --------------------------------------------------------------------------- judge statistics


def test_win_tie_loss_counts():
    # 8>7 win, 7=7 tie, 5<6 loss, 9=9 tie, 6>3 win
    assert win_tie_loss([8, 7, 5, 9, 6], [7, 7, 6, 9, 3]) == (2, 2, 1)


def test_relative_win_rate_hand_values():
    assert relative_win_rate(5, 3, 2) == pytest.approx(0.3)
    assert relative_win_rate(0, 1, 3) == pytest.approx(-0.75)
    assert relative_win_rate(39, 22, 39) == 0.0
    with pytest.raises(ValueError):
        relative_win_rate(0, 0, 0)


def test_trial_win_rates():
    judgements = pd.DataFrame(
        {
            "trial": [1] * 4 + [2] * 4,
            "question_id": ["q1", "q2", "q3", "q4"] * 2,
            "score_a": [3, 2, 1, 2, 1, 1, 1, 1],
            "score_b": [1, 2, 3, 1, 2, 2, 1, 2],
        }
    )
    table = trial_win_rates(judgements)
    assert table["trial"].tolist() == [1, 2]
    assert table[["win", "tie", "loss"]].to_numpy().tolist() == [[2, 1, 1], [0, 1, 3]]
    np.testing.assert_allclose(table["win_rate"], [0.5, 0.0])
    np.testing.assert_allclose(table["tie_rate"], [0.25, 0.25])
    np.testing.assert_allclose(table["loss_rate"], [0.25, 0.75])
    np.testing.assert_allclose(table["relative_win_rate"], [0.25, -0.75])


def test_box_stats_hand_values():
    # quartiles of 1,2,3,4,100 are 2, 3, 4; upper fence 4 + 1.5 * 2 = 7 -> 100 is an outlier
    box = box_stats([4, 1, 100, 3, 2])
    assert box == BoxStats(median=3.0, q1=2.0, q3=4.0, whisker_low=1.0, whisker_high=4.0, outliers=(100.0,))


def test_box_stats_matches_matplotlib():
    values = np.random.default_rng(9).standard_t(2, size=60)
    box, ref = box_stats(values), cbook.boxplot_stats(values)[0]
    assert (box.median, box.q1, box.q3) == pytest.approx((ref["med"], ref["q1"], ref["q3"]))
    assert (box.whisker_low, box.whisker_high) == pytest.approx((ref["whislo"], ref["whishi"]))
    assert box.outliers == pytest.approx(tuple(np.sort(ref["fliers"])))
    assert len(box.outliers) > 0


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        (["win", "win", "win", "loss", "tie"], "win"),
        (["win", "win", "loss", "tie", "tie"], "tie"),  # GraphRAG paper: 2 wins, 1 loss, 2 ties -> tie
        (["loss", "loss", "win"], "loss"),
        (["win", "win", "loss", "loss"], "tie"),  # half is not a strict majority
        (["win", "win", "tie", "tie"], "tie"),
        (["win"], "win"),
        (["tie", "tie", "win"], "tie"),
    ],
)
def test_majority_verdict(verdicts, expected):
    assert majority_verdict(verdicts) == expected


@pytest.mark.parametrize("bad", [[], ["win", "draw"]])
def test_majority_verdict_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        majority_verdict(bad)


def test_bootstrap_relative_win_rate():
    outcomes = ["win"] * 5 + ["tie"] * 3 + ["loss"] * 2
    ci = bootstrap_relative_win_rate(outcomes, seed=4)
    assert ci.mean == pytest.approx(relative_win_rate(5, 3, 2))
    assert -1.0 <= ci.low < 0.3 < ci.high <= 1.0
    assert bootstrap_relative_win_rate(outcomes, seed=4) == ci
    assert bootstrap_relative_win_rate(["win"] * 6) == Interval(1.0, 1.0, 1.0, 6)
    with pytest.raises(ValueError, match="draw"):
        bootstrap_relative_win_rate(["win", "draw"])


# --------------------------------------------------------------------------- cost / quality


def test_pareto_front():
    df = pd.DataFrame(
        {"cost": [1, 2, 3, 2, 4, 1, 4, 5], "quality": [0.5, 0.7, 0.6, 0.4, 0.9, 0.5, 0.8, 0.9]},
        index=["a", "b", "c", "d", "e", "a2", "f", "g"],
    )
    # c is dominated by b (cheaper and better), d by a; f by e (same cost, better quality), g by e
    # (same quality, cheaper); a and its duplicate a2 do not dominate each other
    front = pareto_front(df, "cost", "quality")
    expected = {"a": True, "b": True, "c": False, "d": False, "e": True, "a2": True, "f": False, "g": False}
    assert front.to_dict() == expected


def test_p95_and_latency_summary():
    # linear interpolation at position 0.95 * 99 = 94.05 between 95 and 96
    assert p95(np.arange(1, 101)) == pytest.approx(95.05)
    summary = latency_summary([1.0, 2.0, 3.0, 4.0])
    assert summary == pytest.approx({"n": 4, "mean": 2.5, "p50": 2.5, "p95": 3.85, "max": 4.0})
    with pytest.raises(ValueError, match="empty"):
        latency_summary([])


# --------------------------------------------------------------------------- power of a paired comparison
# The reference power is computed without the noncentral t: conditioning on the sample variance V ~
# chi2(df), the t statistic exceeds c in absolute value when |Z + nc| > c * sqrt(V / df), Z standard
# normal, so power = integral over v of [Phi(nc - c sqrt(v/df)) + Phi(-nc - c sqrt(v/df))] chi2_df(v) dv.
# Power rises with n, so n is the smallest reaching a power when n - 1 does not.

MDE_SD1_N30 = 0.529236  # reference_power(e, 1, 30, .05) = 0.8 (bisection on the integral below)
Z_MDE_SD1_N30 = (1.959964 + 0.841621) / math.sqrt(30)  # (z_.975 + z_.8) / sqrt(30) = 0.5115


def reference_power(effect: float, sd: float, n: int, alpha: float) -> float:
    df, nc = n - 1, abs(effect) * math.sqrt(n) / sd
    critical = scipy_stats.t.ppf(1 - alpha / 2, df)

    def rejects(quantile: float) -> float:  # integrated over the chi2 quantile: no peak for quad to miss
        bound = critical * math.sqrt(scipy_stats.chi2.ppf(quantile, df) / df)
        return scipy_stats.norm.cdf(nc - bound) + scipy_stats.norm.cdf(-nc - bound)

    return integrate.quad(rejects, 0, 1, limit=200, epsabs=1e-11)[0]


@pytest.mark.parametrize(
    ("effect", "sd", "n", "alpha"),
    [
        (0.5, 1.0, 34, 0.05),
        (0.2, 0.4, 10, 0.05),
        (-0.3, 2.0, 80, 0.01),
        (3.0, 1.0, 2, 0.05),
        (1.0, 1.0, 5, 0.05 / 6),
    ],
)
def test_paired_power_matches_the_integral_over_the_sample_variance(effect, sd, n, alpha):
    assert paired_power(effect, sd, n, alpha) == pytest.approx(
        reference_power(effect, sd, n, alpha), abs=1e-8
    )


def test_paired_power_is_alpha_without_effect_and_stays_finite_at_large_noncentrality():
    assert paired_power(0.0, 1.0, 30, 0.05) == pytest.approx(0.05)
    # noncentrality 40 at df 29: scipy's nct lower tail is NaN there; the power is 1
    assert paired_power(40 / math.sqrt(30), 1.0, 30, 0.05) == 1.0
    assert paired_power(0.1, 1.0, 100_000, 0.05) == 1.0


def test_minimum_detectable_difference_hand_value_and_z_approximation():
    mde = minimum_detectable_difference(1.0, 30, 0.05, 0.8)
    assert mde == pytest.approx(MDE_SD1_N30, abs=1e-5)
    assert reference_power(mde, 1.0, 30, 0.05) == pytest.approx(0.8, abs=1e-6)
    # the t-test needs a little more than the z approximation 2.8 / sqrt(30) = 0.511 at n = 30 (3.5%)
    assert 0 < mde - Z_MDE_SD1_N30 < 0.03
    # it scales with sd, and reaches the z approximation as n grows
    assert minimum_detectable_difference(2.5, 30, 0.05, 0.8) == pytest.approx(2.5 * mde)
    assert minimum_detectable_difference(1.0, 10**6, 0.05, 0.8) == pytest.approx(2.801585 / 1000, rel=1e-5)


def test_minimum_detectable_difference_at_two_questions_and_a_holm_level():
    # df = 1 at alpha / 6: far beyond the z approximation, found by widening the bracket
    mde = minimum_detectable_difference(1.0, 2, 0.05 / 6, 0.8)
    assert mde > 10 * Z_MDE_SD1_N30 * math.sqrt(30 / 2)
    assert reference_power(mde, 1.0, 2, 0.05 / 6) == pytest.approx(0.8, abs=1e-4)


def test_questions_needed_textbook_value():
    # paired t, d = 0.5, alpha .05 two-sided, power .8: 34 (G*Power's figure); the integral agrees
    assert questions_needed(1.0, 0.5, 0.05, 0.8) == 34
    assert reference_power(0.5, 1.0, 33, 0.05) < 0.8 <= reference_power(0.5, 1.0, 34, 0.05)
    assert questions_needed(1.0, -0.5, 0.05, 0.8) == 34


@pytest.mark.parametrize(
    ("sd", "effect", "alpha", "power"),
    [(1.0, 0.8, 0.05, 0.8), (0.3, 0.1, 0.01, 0.9), (1.0, 3.0, 0.05, 0.5), (2.0, 0.25, 0.05 / 4, 0.8)],
)
def test_questions_needed_is_the_smallest_n_reaching_the_power(sd, effect, alpha, power):
    n = questions_needed(sd, effect, alpha, power)
    assert n == 2 or reference_power(effect, sd, n - 1, alpha) < power
    assert reference_power(effect, sd, n, alpha) >= power


def test_questions_needed_huge_and_tiny():
    # at a millionth of sd the t-test is the z-test: ((z_.975 + z_.8) / 0.001)^2 = 7848862.2
    assert questions_needed(1.0, 0.001, 0.05, 0.8) in (7848863, 7848864)
    assert questions_needed(1.0, 50.0, 0.05, 0.8) == 2
    with pytest.raises(ValueError, match="max_n=1000"):
        questions_needed(1.0, 0.01, 0.05, 0.8, max_n=1000)


def test_power_simulation_paired_t_detects_at_the_stated_power():
    # 4000 runs of 30 normal differences at the minimum detectable difference: the paired t-test rejects
    # in 80% of them (binomial standard error 0.006, tolerance 0.02)
    mde = minimum_detectable_difference(1.0, 30, 0.05, 0.8)
    runs = np.random.default_rng(1616).normal(mde, 1.0, size=(4000, 30))
    zeros = np.zeros(30)
    detected = np.mean([paired_t(run, zeros).p_value < 0.05 for run in runs])
    assert abs(detected - 0.8) < 0.02


def test_power_simulation_of_the_claim_rule_is_a_little_below():
    # The kit's claim rule (bootstrap interval off zero AND Wilcoxon p < alpha) at the t-test's minimum
    # detectable difference detects a little less often: Wilcoxon's efficiency on normal data is 0.955,
    # and both conditions must hold. Measured (seed 1616, 4000 runs, 500 resamples): t-test 0.802,
    # Wilcoxon alone 0.783, the claim rule 0.772.
    mde = minimum_detectable_difference(1.0, 30, 0.05, 0.8)
    runs = np.random.default_rng(1616).normal(mde, 1.0, size=(4000, 30))
    zeros = np.zeros(30)
    claims = []
    for seed, run in enumerate(runs):
        ci = paired_bootstrap_diff(run, zeros, n_resamples=500, seed=seed)
        claims.append(claim_supported(ci.low, ci.high, wilcoxon_signed_rank(run, zeros).p_value))
    detected = np.mean(claims)
    assert 0.65 <= detected <= 0.85
    assert detected < np.mean([paired_t(run, zeros).p_value < 0.05 for run in runs])


def test_power_on_binary_correctness_against_mcnemar():
    # 0/1 correctness per question: the method alone right on 25% of questions, the baseline alone on
    # 10%, so the difference d is +1, -1 or 0 with mean 0.15 and sd sqrt(0.35 - 0.15^2) = 0.5723. The
    # paired-t figure asks 117 questions (~41 discordant: McNemar's chi-square path). McNemar with its
    # continuity correction is conservative, so it detects a little less often than the stated 0.8
    # (measured 0.755, seed 1617): the normal approximation is near, a little optimistic, on 0/1 measures.
    only_method, only_baseline = 0.25, 0.10
    effect = only_method - only_baseline
    sd = math.sqrt(only_method + only_baseline - effect**2)
    n = questions_needed(sd, effect, 0.05, 0.8)
    assert n == 117
    draws = np.random.default_rng(1617).random((4000, n))
    # concordant questions are drawn as both wrong: McNemar reads only the discordant ones
    method_right = draws < only_method
    baseline_right = (draws >= only_method) & (draws < only_method + only_baseline)
    detected = np.mean(
        [mcnemar_test(a, b).p_value < 0.05 for a, b in zip(method_right, baseline_right, strict=True)]
    )
    assert abs(detected - 0.8) < 0.07


def _standardized(n: int, mean: float) -> np.ndarray:
    """Differences (n of them) with the given mean and sample sd exactly 1 (ddof=1)."""
    values = np.random.default_rng(n).normal(size=n)
    return (values - values.mean()) / values.std(ddof=1) + mean


def test_power_analysis_figures():
    result = power_analysis(_standardized(30, 0.3), alpha=0.05, power=0.8, target=0.5)
    assert (result.n, result.status) == (30, "ok")
    assert result.sd == pytest.approx(1.0)
    assert result.mde == pytest.approx(MDE_SD1_N30, abs=1e-5)
    assert result.mde_adjusted == result.mde  # one comparison: Holm's first step is at alpha itself
    assert (result.target, result.n_needed, result.n_needed_adjusted, result.enough) == (0.5, 34, 34, False)
    assert power_analysis(_standardized(34, 0.3), 0.05, 0.8, 0.5).enough is True


def test_power_analysis_holm_level_for_several_comparisons():
    result = power_analysis(_standardized(40, -0.2), alpha=0.05, power=0.8, target=0.5, m_comparisons=3)
    # Holm's first step tests at alpha / 3: a larger detectable difference, more questions
    n_adjusted = result.n_needed_adjusted
    assert (
        reference_power(0.5, 1.0, n_adjusted - 1, 0.05 / 3)
        < 0.8
        <= reference_power(0.5, 1.0, n_adjusted, 0.05 / 3)
    )
    assert result.n_needed == 34 and n_adjusted == 45
    assert result.enough is False
    assert result.mde_adjusted > result.mde
    assert reference_power(result.mde_adjusted, 1.0, 40, 0.05 / 3) == pytest.approx(0.8, abs=1e-6)


def test_power_analysis_without_a_target_gives_no_counts():
    result = power_analysis(_standardized(30, 0.0), 0.05, 0.8, target=None)
    assert result.mde == pytest.approx(MDE_SD1_N30, abs=1e-5)
    assert (result.n_needed, result.n_needed_adjusted, result.enough) == (None, None, None)


@pytest.mark.parametrize(
    ("differences", "status"),
    [
        ([], "fewer than 2 paired questions"),
        ([0.4], "fewer than 2 paired questions"),
        ([0.1] * 7, "no variance: all 7 differences are equal"),
        ([0.0, 0.0], "no variance: all 2 differences are equal"),
    ],
)
def test_power_analysis_says_why_it_has_no_figures(differences, status):
    result = power_analysis(differences, 0.05, 0.8, target=0.1, m_comparisons=2)
    assert result.status == status
    assert result.n == len(differences)
    assert all(math.isnan(v) for v in (result.sd, result.mde, result.mde_adjusted))
    assert (result.n_needed, result.n_needed_adjusted, result.enough) == (None, None, None)


def test_power_analysis_nan_raises():
    with pytest.raises(ValueError, match="differences contains 1 NaN of 3"):
        power_analysis([0.1, np.nan, 0.3], 0.05, 0.8, 0.1)


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: paired_power(0.5, 1.0, 1, 0.05), "n must be at least 2"),
        (lambda: paired_power(0.5, 0.0, 30, 0.05), "sd must be"),
        (lambda: paired_power(0.5, 1.0, 30, 1.5), "alpha must"),
        (lambda: paired_power(np.nan, 1.0, 30, 0.05), "effect must"),
        (lambda: minimum_detectable_difference(1.0, 30, 0.05, 0.04), "power must exceed alpha"),
        (lambda: minimum_detectable_difference(1.0, 0, 0.05, 0.8), "n must be at least 2"),
        (lambda: questions_needed(1.0, 0.0, 0.05, 0.8), "effect must"),
        (lambda: questions_needed(-1.0, 0.5, 0.05, 0.8), "sd must"),
        (lambda: power_analysis([0.1, 0.2], 0.05, 0.8, 0.0), "target must"),
        (lambda: power_analysis([0.1, 0.2], 0.05, 0.8, 0.1, m_comparisons=0), "m_comparisons must"),
    ],
)
def test_power_functions_name_the_bad_argument(call, names):
    with pytest.raises(ValueError, match=names):
        call()


def test_detectable_from_interval_is_the_normal_power_formula_on_the_implied_standard_error():
    # a 95% interval of width 0.2 implies se = 0.2 / (2 x 1.959964) = 0.0510214; at 80% power and
    # alpha 0.05 the detectable difference is (1.959964 + 0.841621) x se = 0.142941
    assert detectable_from_interval(-0.1, 0.1, 0.05, 0.8) == pytest.approx(0.142941, abs=1e-6)
    # a 90% interval of the same width implies a larger se (z = 1.644854): 0.2 / 3.289707 x 2.801585
    assert detectable_from_interval(0.3, 0.5, 0.05, 0.8, confidence=0.9) == pytest.approx(0.170324, abs=1e-6)
    assert math.isnan(detectable_from_interval(0.2, 0.2, 0.05, 0.8))
    assert math.isnan(detectable_from_interval(np.nan, 0.2, 0.05, 0.8))


def test_unpaired_bootstrap_diff_resamples_each_sample_on_its_own():
    from ragtrial.stats import unpaired_bootstrap_diff

    a, b = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.0, 1.0, 1.0])
    ci = unpaired_bootstrap_diff(a, b, n_resamples=1000, seed=5)
    rng = np.random.default_rng(5)
    resampled_a = a[rng.integers(0, 4, size=(1000, 4))].mean(axis=1)
    diffs = resampled_a - b[rng.integers(0, 3, size=(1000, 3))].mean(axis=1)
    assert (ci.mean, ci.n) == (pytest.approx(2.5 - 2 / 3), 3)
    assert (ci.low, ci.high) == pytest.approx(tuple(np.quantile(diffs, [0.025, 0.975])))
