"""Every statistic of the kit: bootstrap intervals, paired tests, Holm correction, judge win rates,
the power of a paired comparison.

Pure functions over arrays and DataFrames. Randomness comes from `numpy.random.default_rng(seed)`.
NaN is never dropped silently: callers filter failed questions explicitly, so NaN raises ValueError.
Paired functions take two arrays aligned on the same questions.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import optimize, stats

OUTCOME_CODES = {"win": 1, "tie": 0, "loss": -1}
EXACT_MCNEMAR_BELOW = 25  # discordant pairs below this use the exact binomial test


# The level of every interval the kit reports unless a caller sets one.
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class McNemarResult:
    b01: int  # a wrong, b right
    b10: int  # a right, b wrong
    statistic: float
    p_value: float
    method: str


@dataclass(frozen=True)
class TestResult:
    __test__ = False  # not a pytest test class

    statistic: float
    p_value: float
    n_nonzero: int
    method: str


@dataclass(frozen=True)
class BoxStats:
    median: float
    q1: float
    q3: float
    whisker_low: float  # most extreme data point within 1.5 IQR of the box (matplotlib convention)
    whisker_high: float
    outliers: tuple[float, ...]


def _values(values: ArrayLike, name: str = "values", nonempty: bool = False) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if nonempty and arr.size == 0:
        raise ValueError(f"{name} is empty")
    n_nan = int(np.isnan(arr).sum())
    if n_nan:
        raise ValueError(f"{name} contains {n_nan} NaN of {arr.size}; filter failures explicitly")
    return arr


def _pair(a: ArrayLike, b: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    x, y = _values(a, "a"), _values(b, "b")
    if x.size != y.size:
        raise ValueError(f"paired arrays differ in length: {x.size} vs {y.size}")
    return x, y


def _bool_pair(a: ArrayLike, b: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    x, y = _pair(a, b)
    if not np.isin(np.concatenate([x, y]), (0.0, 1.0)).all():
        raise ValueError("correctness arrays must hold booleans or 0/1 values")
    return x.astype(bool), y.astype(bool)


def bootstrap_mean_ci(
    values: ArrayLike, n_resamples: int = 2000, confidence: float = CONFIDENCE, seed: int = 0
) -> Interval:
    """Percentile bootstrap interval of the mean, resampling questions with replacement."""
    arr = _values(values, nonempty=True)
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, arr.size, size=(n_resamples, arr.size))].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return Interval(float(arr.mean()), float(low), float(high), int(arr.size))


def paired_bootstrap_diff(
    a: ArrayLike, b: ArrayLike, n_resamples: int = 2000, confidence: float = CONFIDENCE, seed: int = 0
) -> Interval:
    """Interval of mean(a - b); resampling the differences resamples question indices jointly."""
    x, y = _pair(a, b)
    return bootstrap_mean_ci(x - y, n_resamples, confidence, seed)


def unpaired_bootstrap_diff(
    a: ArrayLike, b: ArrayLike, n_resamples: int = 2000, confidence: float = CONFIDENCE, seed: int = 0
) -> Interval:
    """Interval of mean(a) - mean(b) for two independent samples (each resampled on its own); `n` is
    the smaller sample's size.
    """
    x, y = _values(a, nonempty=True), _values(b, nonempty=True)
    rng = np.random.default_rng(seed)
    x_means = x[rng.integers(0, x.size, size=(n_resamples, x.size))].mean(axis=1)
    diffs = x_means - y[rng.integers(0, y.size, size=(n_resamples, y.size))].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(diffs, [tail, 1.0 - tail])
    return Interval(float(x.mean() - y.mean()), float(low), float(high), int(min(x.size, y.size)))


def unpaired_test(a: ArrayLike, b: ArrayLike, binary: bool) -> TestResult:
    """Two independent samples: Fisher's exact test on 0/1 values, else the two-sided Mann-Whitney U."""
    x, y = _values(a, nonempty=True), _values(b, nonempty=True)
    if binary:
        table = [[int(x.sum()), int(x.size - x.sum())], [int(y.sum()), int(y.size - y.sum())]]
        res = stats.fisher_exact(table)
        return TestResult(float(res.statistic), float(res.pvalue), int(x.size + y.size), "fisher exact")
    res = stats.mannwhitneyu(x, y, alternative="two-sided")
    return TestResult(float(res.statistic), float(res.pvalue), int(x.size + y.size), "mann-whitney u")


def mcnemar_test(correct_a: ArrayLike, correct_b: ArrayLike) -> McNemarResult:
    """McNemar test on paired correctness: exact binomial below 25 discordant pairs, else chi-square
    with continuity correction.
    """
    x, y = _bool_pair(correct_a, correct_b)
    b01, b10 = int((~x & y).sum()), int((x & ~y).sum())
    n = b01 + b10
    if n == 0:
        return McNemarResult(0, 0, 0.0, 1.0, "none: no discordant pairs")
    if n < EXACT_MCNEMAR_BELOW:
        p = stats.binomtest(b10, n, 0.5).pvalue
        return McNemarResult(b01, b10, float(min(b01, b10)), float(p), "exact binomial")
    statistic = (abs(b01 - b10) - 1) ** 2 / n
    p = stats.chi2.sf(statistic, df=1)
    return McNemarResult(b01, b10, float(statistic), float(p), "chi-square, continuity corrected")


def wilcoxon_signed_rank(a: ArrayLike, b: ArrayLike) -> TestResult:
    """Two-sided Wilcoxon signed-rank test; zero differences are dropped (scipy's 'wilcox')."""
    return _on_differences(a, b, stats.wilcoxon, "wilcoxon")


def paired_t(a: ArrayLike, b: ArrayLike) -> TestResult:
    """Two-sided paired t-test; all-zero differences give p = 1."""
    return _on_differences(a, b, stats.ttest_rel, "paired t")


def _on_differences(a: ArrayLike, b: ArrayLike, test: Callable[..., Any], label: str) -> TestResult:
    """A scipy paired test, with p = 1 instead of scipy's warning when every difference is zero."""
    x, y = _pair(a, b)
    n_nonzero = int(np.count_nonzero(x - y))
    if n_nonzero == 0:
        return TestResult(0.0, 1.0, 0, f"{label}: all differences zero")
    res = test(x, y)
    return TestResult(float(res.statistic), float(res.pvalue), n_nonzero, label)


def paired_test(a: ArrayLike, b: ArrayLike, normality_alpha: float = 0.05) -> TestResult:
    """Paired t-test when Shapiro-Wilk (n >= 8, non-constant differences) does not reject normality
    of the differences; Wilcoxon signed-rank otherwise. `method` records which ran and why.
    """
    x, y = _pair(a, b)
    diff = x - y
    if diff.size < 8 or np.ptp(diff) == 0:
        chosen, reason = wilcoxon_signed_rank(x, y), "n < 8" if diff.size < 8 else "constant differences"
    else:
        shapiro_p = float(stats.shapiro(diff).pvalue)
        chosen = paired_t(x, y) if shapiro_p > normality_alpha else wilcoxon_signed_rank(x, y)
        reason = f"shapiro p={shapiro_p:.3g}"
    return replace(chosen, method=f"{chosen.method} ({reason})")


def holm_correction(p_values: Mapping[str, float] | Sequence[float], alpha: float = 0.05) -> pd.DataFrame:
    """Holm-Bonferroni step-down adjusted p-values (monotone, capped at 1), in input order, and
    `reject` by `rejects` (p_holm <= alpha, the claim rule's test). A sequence is named by position
    ("0", "1", ...).
    """
    if isinstance(p_values, Mapping):
        names, raw = [str(k) for k in p_values], _values(list(p_values.values()), "p_values")
    else:
        raw = _values(p_values, "p_values")
        names = [str(i) for i in range(raw.size)]
    if ((raw < 0) | (raw > 1)).any():
        raise ValueError("p-values must lie in [0, 1]")
    order = np.argsort(raw, kind="stable")
    m = raw.size
    stepped = np.maximum.accumulate(raw[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    reject = [rejects(p, alpha) for p in adjusted]
    return pd.DataFrame({"name": names, "p_raw": raw, "p_holm": adjusted, "reject": reject})


def complementarity(correct_a: ArrayLike, correct_b: ArrayLike) -> dict[str, dict[str, float]]:
    """How two methods' correct answers overlap: {only_a, only_b, both, neither} -> {count, share}."""
    x, y = _bool_pair(correct_a, correct_b)
    if x.size == 0:
        raise ValueError("complementarity needs at least one question")
    masks = {"only_a": x & ~y, "only_b": ~x & y, "both": x & y, "neither": ~x & ~y}
    return {k: {"count": int(m.sum()), "share": float(m.mean())} for k, m in masks.items()}


def _score_matrix(scores: pd.DataFrame, value_col: str = "score") -> pd.DataFrame:
    """question_id x method matrix; duplicates, gaps and NaN are errors, not silently dropped."""
    dup = scores.duplicated(["question_id", "method"])
    if dup.any():
        raise ValueError(f"{int(dup.sum())} duplicate (question_id, method) rows")
    _values(scores[value_col], value_col)
    wide = scores.pivot(index="question_id", columns="method", values=value_col)
    missing = wide.isna().sum()
    if missing.any():
        raise ValueError(f"methods lack scores for some questions: {missing[missing > 0].to_dict()}")
    return wide[list(pd.unique(scores["method"]))]


def paired_difference(
    a: ArrayLike,
    b: ArrayLike,
    binary: bool,
    n_resamples: int = 2000,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> dict[str, Any]:
    """`a` against `b` on the same questions (position i of each): n, mean_diff = mean(a - b) with its
    paired bootstrap interval, wins/losses/ties of a, and the paired test of the values' kind (McNemar
    when binary, Wilcoxon otherwise) before any multiplicity adjustment.
    """
    ci = paired_bootstrap_diff(a, b, n_resamples, confidence, seed)
    test = mcnemar_test(a, b) if binary else wilcoxon_signed_rank(a, b)
    win, tie, loss = win_tie_loss(a, b)
    return {"n": ci.n, "mean_diff": ci.mean, "ci_low": ci.low, "ci_high": ci.high} | {
        "wins": win,
        "losses": loss,
        "ties": tie,
        "test": test.method,
        "statistic": test.statistic,
        "p_value": test.p_value,
    }


def paired_comparison_table(
    scores: pd.DataFrame,
    baseline: str,
    binary: bool,
    n_resamples: int = 2000,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Each method against `baseline` on the same questions (long frame: question_id, method, score).

    mean_diff = mean(method - baseline) with a paired bootstrap interval; McNemar when scores are
    binary, Wilcoxon otherwise; p_holm adjusts across methods; supported = `claim_supported` (the
    interval excludes 0 and the Holm-adjusted test rejects at `alpha`).
    """
    wide = _score_matrix(scores)
    if baseline not in wide.columns:
        raise ValueError(f"baseline {baseline!r} not among methods {list(wide.columns)}")
    base = wide[baseline].to_numpy(float)
    rows = [
        {"method": method, "baseline": baseline}
        | paired_difference(wide[method].to_numpy(float), base, binary, n_resamples, confidence, seed)
        for method in wide.columns
        if method != baseline
    ]
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    return with_holm_claims(table, alpha)


def summary_by_group(
    scores: pd.DataFrame,
    group_cols: str | Sequence[str],
    value_col: str,
    n_resamples: int = 2000,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> pd.DataFrame:
    """Mean with a bootstrap interval per group (e.g. per method, per method x question_type)."""
    cols = [group_cols] if isinstance(group_cols, str) else list(group_cols)
    _values(scores[value_col], value_col)
    rows = []
    for key, group in scores.groupby(cols, sort=False, dropna=False):
        ci = bootstrap_mean_ci(group[value_col], n_resamples, confidence, seed)
        keys = dict(zip(cols, key, strict=True))
        rows.append({**keys, "n": ci.n, "mean": ci.mean, "ci_low": ci.low, "ci_high": ci.high})
    return pd.DataFrame(rows, columns=[*cols, "n", "mean", "ci_low", "ci_high"])


def win_tie_loss(score_a: ArrayLike, score_b: ArrayLike) -> tuple[int, int, int]:
    """Per-question (win, tie, loss) counts of A against B from overall judge scores."""
    x, y = _pair(score_a, score_b)
    return int((x > y).sum()), int((x == y).sum()), int((x < y).sum())


def relative_win_rate(win: int, tie: int, loss: int) -> float:
    """(A_win - B_win) / (A_win + B_win + Tie), in [-1, 1]."""
    total = win + tie + loss
    if total <= 0:
        raise ValueError("relative win rate needs at least one judged question")
    return (win - loss) / total


def trial_win_rates(judgements: pd.DataFrame) -> pd.DataFrame:
    """One row per trial (columns trial, question_id, score_a, score_b): counts and rates of A vs B."""
    rows = []
    for trial, group in judgements.groupby("trial", sort=True, dropna=False):
        win, tie, loss = win_tie_loss(group["score_a"], group["score_b"])
        n = win + tie + loss
        rates = {"win_rate": win / n, "tie_rate": tie / n, "loss_rate": loss / n}
        counts = {"trial": trial, "n": n, "win": win, "tie": tie, "loss": loss}
        rows.append(counts | rates | {"relative_win_rate": relative_win_rate(win, tie, loss)})
    return pd.DataFrame(rows)


def box_stats(values: ArrayLike) -> BoxStats:
    """Box-plot numbers (linear-interpolated quartiles, 1.5 IQR whiskers), as matplotlib draws them."""
    arr = _values(values, nonempty=True)
    q1, median, q3 = np.percentile(arr, [25, 50, 75])
    fence_low, fence_high = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    inside = arr[(arr >= fence_low) & (arr <= fence_high)]
    outliers = tuple(float(v) for v in np.sort(arr[(arr < fence_low) | (arr > fence_high)]))
    return BoxStats(float(median), float(q1), float(q3), float(inside.min()), float(inside.max()), outliers)


def majority_verdict(verdicts: Sequence[str]) -> str:
    """The verdict held by a strict majority of trials ('win', 'loss' or 'tie'), else 'tie'."""
    unknown = set(verdicts) - OUTCOME_CODES.keys()
    if unknown or not verdicts:
        raise ValueError(f"need a non-empty list of win/tie/loss verdicts, got unknown {sorted(unknown)}")
    verdict, count = Counter(verdicts).most_common(1)[0]
    return verdict if count * 2 > len(verdicts) else "tie"


def bootstrap_relative_win_rate(
    outcomes: Sequence[str], n_resamples: int = 2000, confidence: float = CONFIDENCE, seed: int = 0
) -> Interval:
    """Bootstrap interval of the relative win rate from per-question 'win'/'tie'/'loss' outcomes
    (the relative win rate is the mean of win=+1, tie=0, loss=-1).
    """
    unknown = set(outcomes) - OUTCOME_CODES.keys()
    if unknown:
        raise ValueError(f"outcomes must be win/tie/loss, got {sorted(unknown)}")
    codes = np.array([OUTCOME_CODES[o] for o in outcomes], dtype=float)
    return bootstrap_mean_ci(codes, n_resamples, confidence, seed)


def proportion_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """Wilson score interval of a proportion (successes of n independent trials, e.g. simulated studies
    whose interval covered the truth); it stays inside [0, 1] and is not degenerate at 0 or n.
    """
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"a proportion needs 0 <= successes <= n and n >= 1, got {successes} of {n}")
    z = float(stats.norm.ppf(0.5 + confidence / 2.0))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), n)


def excludes_zero(low: float, high: float) -> bool:
    """Whether an interval lies on one side of zero (NaN bounds do not)."""
    return bool(low > 0 or high < 0)


# The one rule for a finding, applied by every narrative through `claim_supported` / `claim_text`:
# the paired interval excludes zero AND the multiplicity-adjusted test rejects at CLAIM_ALPHA (`rejects`:
# p <= alpha, the conventional rule, Holm's own and the `reject` column's). Either
# alone misleads on the small samples these notebooks often have: a percentile bootstrap interval of
# 8 questions is too narrow (it ignores that the 8 are a sample), and a test says nothing of the size
# or direction a reader takes from the interval. Requiring both is conservative by design.
CLAIM_ALPHA = 0.05
NO_CLAIM = "the interval includes zero, so **no claim** either way"


def rejects(p_adjusted: float, alpha: float = CLAIM_ALPHA) -> bool:
    """Whether a test rejects: p <= alpha (the conventional rule: a p-value of exactly alpha rejects).
    A NaN p-value, from a test that could not run, never rejects.
    """
    return bool(p_adjusted <= alpha)


def claim_supported(low: float, high: float, p_adjusted: float, alpha: float = CLAIM_ALPHA) -> bool:
    """The claim rule: the interval excludes zero and the adjusted test `rejects` (p <= `alpha`; a NaN
    p-value never supports a claim).
    """
    return excludes_zero(low, high) and rejects(p_adjusted, alpha)


def with_holm_claims(
    table: pd.DataFrame, alpha: float = CLAIM_ALPHA, family: str | None = None
) -> pd.DataFrame:
    """`table` (p_value, ci_low, ci_high per row) with `p_holm` adjusted over its rows (or within each
    `family` column value) and `supported` by the claim rule on that adjusted p: the one place the two
    are set together, so a table never pairs an adjusted p with a claim decided on the raw one.
    """
    if family is None:
        p_holm = holm_correction(table["p_value"].tolist(), alpha)["p_holm"].to_numpy()
    else:
        p_holm = table.groupby(family, sort=False)["p_value"].transform(
            lambda p: holm_correction(p.tolist(), alpha)["p_holm"].to_numpy()
        )
    table = table.assign(p_holm=p_holm)
    return table.assign(
        supported=[
            claim_supported(lo, hi, p, alpha)
            for lo, hi, p in zip(table["ci_low"], table["ci_high"], table["p_holm"], strict=True)
        ]
    )


def claim_text(low: float, high: float, p_adjusted: float, claim: str, alpha: float = CLAIM_ALPHA) -> str:
    """The claim rule in words: `claim` when `claim_supported`, otherwise why there is no claim."""
    if claim_supported(low, high, p_adjusted, alpha):
        return claim
    if not excludes_zero(low, high):
        return NO_CLAIM
    if np.isnan(p_adjusted):
        return "the interval excludes zero but no test could be run, so **no claim** either way"
    return (
        f"the interval excludes zero but the adjusted test does not reject (p = {p_adjusted:.3g}, "
        f"above {alpha:g}), so **no claim** either way"
    )


def pareto_front(df: pd.DataFrame, cost_col: str, quality_col: str) -> pd.Series:
    """True for rows no other row dominates (cost <= and quality >=, strictly better in one)."""
    cost, quality = _values(df[cost_col], cost_col), _values(df[quality_col], quality_col)
    no_worse = (cost[None, :] <= cost[:, None]) & (quality[None, :] >= quality[:, None])
    better = (cost[None, :] < cost[:, None]) | (quality[None, :] > quality[:, None])
    return pd.Series(~(no_worse & better).any(axis=1), index=df.index, name="pareto")


def p95(values: ArrayLike) -> float:
    """95th percentile (linear interpolation), e.g. of per-call latencies."""
    return float(np.percentile(_values(values, nonempty=True), 95))


def latency_summary(latencies_s: ArrayLike) -> dict[str, float]:
    """n, mean, p50, p95 and max of latencies in seconds."""
    arr = _values(latencies_s, "latencies_s", nonempty=True)
    return {"n": arr.size, "mean": arr.mean(), "p50": np.median(arr), "p95": p95(arr), "max": arr.max()}


# --------------------------------------------------------------------------- power of a paired comparison


NO_PAIRS = "fewer than 2 paired questions"


@dataclass(frozen=True)
class PowerResult:
    """What a set of paired differences can detect (`power_analysis`). When `status` is not "ok" every
    figure is NaN (floats) or None (counts, `enough`): the reason is in `status`, never a made-up number.
    """

    n: int  # paired questions
    sd: float  # standard deviation of the differences (ddof=1)
    alpha: float
    power: float
    m_comparisons: int
    mde: float  # smallest |mean difference| detected with `power` at `alpha`
    mde_adjusted: float  # the same at alpha / m_comparisons, the level Holm's first step needs
    target: float | None  # the difference the question counts are for
    n_needed: int | None  # questions to detect `target` at alpha
    n_needed_adjusted: int | None  # the same at alpha / m_comparisons
    enough: bool | None  # n >= n_needed_adjusted
    status: str  # "ok", or why the figures cannot be computed


def _check_level(value: float, name: str) -> float:
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value}")
    return float(value)


def _check_n(n: int) -> int:
    if n < 2:
        raise ValueError(f"n must be at least 2 paired questions, got {n}")
    return n


def _check_sd(sd: float) -> float:
    if not sd > 0 or not math.isfinite(sd):
        raise ValueError(f"sd must be a positive finite number, got {sd}")
    return float(sd)


def paired_power(effect: float, sd: float, n: int, alpha: float) -> float:
    """Power of the two-sided paired t-test at level `alpha` on `n` differences with mean `effect` and
    standard deviation `sd`: with T ~ noncentral t(df = n - 1, nc = effect * sqrt(n) / sd) and
    c = t_{1 - alpha/2, n-1}, power = P(T > c) + P(T < -c).
    """
    n, sd, alpha = _check_n(n), _check_sd(sd), _check_level(alpha, "alpha")
    if not math.isfinite(effect):
        raise ValueError(f"effect must be finite, got {effect}")
    df, nc = n - 1, abs(effect) * math.sqrt(n) / sd
    critical = stats.t.ppf(1.0 - alpha / 2.0, df)
    # P(T < -c) as the upper tail of -T ~ nct(df, -nc): scipy's lower tail returns NaN for large nc
    return float(stats.nct.sf(critical, df, nc) + stats.nct.sf(critical, df, -nc))


def _z_effect(sd: float, n: float, alpha: float, power: float) -> float:
    """The normal approximation of the detectable difference: (z_{1-alpha/2} + z_power) * sd / sqrt(n)."""
    return (stats.norm.ppf(1.0 - alpha / 2.0) + stats.norm.ppf(power)) * sd / math.sqrt(n)


def _check_power(power: float, alpha: float) -> float:
    _check_level(power, "power")
    if power <= alpha:  # any difference, even 0, is "detected" this often
        raise ValueError(f"power must exceed alpha ({alpha}), got {power}")
    return float(power)


def minimum_detectable_difference(sd: float, n: int, alpha: float, power: float) -> float:
    """The smallest |mean difference| the paired t-test on `n` questions detects with probability
    `power` at level `alpha`: the root in effect of paired_power(effect, sd, n, alpha) = power (brentq,
    so exact for the t-test at small n, where the z approximation (z_{1-alpha/2} + z_power) * sd /
    sqrt(n) is too small).
    """
    _check_power(power, _check_level(alpha, "alpha"))
    high = _z_effect(_check_sd(sd), _check_n(n), alpha, power)
    while paired_power(high, sd, n, alpha) < power:  # the t-test needs more than z; few doublings at n=2
        high *= 2.0
    return float(optimize.brentq(lambda e: paired_power(e, sd, n, alpha) - power, 0.0, high, xtol=1e-12))


def detectable_from_interval(
    low: float, high: float, alpha: float, power: float, confidence: float = CONFIDENCE
) -> float:
    """The smallest |mean difference| a two-sided normal test detects with `power` at level `alpha`,
    from the standard error a `confidence` interval of the mean implies (normal approximation, for a
    saved interval whose per-question values are not at hand): se = (high - low) / (2 z_{(1+confidence)/2}),
    detectable = (z_{1-alpha/2} + z_power) * se. NaN when the interval has no width (every value the
    same: no spread to say what a difference would look like) or a NaN bound.
    """
    _check_power(power, _check_level(alpha, "alpha"))
    width = high - low
    if not width > 0:
        return math.nan
    se = width / (2.0 * stats.norm.ppf(0.5 + _check_level(confidence, "confidence") / 2.0))
    return float(_z_effect(se, 1, alpha, power))


def questions_needed(sd: float, effect: float, alpha: float, power: float, max_n: int = 10**7) -> int:
    """The smallest n >= 2 with paired_power(effect, sd, n, alpha) >= power. Power rises with n, so a
    bisection on n is exact for the t-test; it is bracketed by halving or doubling from the z
    approximation n_z = ((z_{1-alpha/2} + z_power) * sd / effect)^2. ValueError when even `max_n`
    questions are not enough.
    """
    _check_power(power, _check_level(alpha, "alpha"))
    if effect == 0 or not math.isfinite(effect):
        raise ValueError(f"effect must be a non-zero finite difference, got {effect}")

    def reaches(n: int) -> bool:
        return n >= 2 and paired_power(effect, sd, n, alpha) >= power

    guess = min(max_n, max(2, math.ceil((_z_effect(_check_sd(sd), 1, alpha, power) / effect) ** 2)))
    low, high = guess, guess  # brought to: not reaches(low), reaches(high)
    if reaches(guess):
        while reaches(low):
            high, low = low, low // 2
    else:
        while not reaches(high):
            if high == max_n:
                raise ValueError(
                    f"more than max_n={max_n} questions are needed to detect {effect} with sd {sd}"
                )
            low, high = high, min(2 * high, max_n)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid, high)
    return high


def power_analysis(
    differences: ArrayLike, alpha: float, power: float, target: float | None, m_comparisons: int = 1
) -> PowerResult:
    """What these paired differences (one per question, method - baseline) can detect, from their
    observed standard deviation (ddof=1): the minimum detectable difference at `alpha` and at
    alpha / m_comparisons (Holm's first step, when the comparison is one of m), and the questions
    needed to detect `target` (None: no target, no counts). Fewer than 2 differences, or all equal
    (sd 0: the t-test is undefined), give a status saying so and NaN / None figures.
    """
    diff = _values(differences, "differences")
    alpha, power = _check_level(alpha, "alpha"), _check_power(power, alpha)
    if m_comparisons < 1:
        raise ValueError(f"m_comparisons must be at least 1, got {m_comparisons}")
    if target is not None and not target > 0:
        raise ValueError(f"target must be a positive difference or None, got {target}")
    levels: dict[str, Any] = {
        "alpha": alpha,
        "power": power,
        "m_comparisons": int(m_comparisons),
        "target": target,
    }
    nothing: dict[str, Any] = {
        "mde": math.nan,
        "mde_adjusted": math.nan,
        "n_needed": None,
        "n_needed_adjusted": None,
    }
    if diff.size < 2:
        return PowerResult(diff.size, math.nan, **levels, **nothing, enough=None, status=NO_PAIRS)
    sd = float(diff.std(ddof=1))
    # equal up to float rounding (scores minus scores leave residues of 1e-17): no variance to plan from
    if np.ptp(diff) <= 1e-9 * max(1.0, float(np.abs(diff).max())):
        status = f"no variance: all {diff.size} differences are equal"
        return PowerResult(diff.size, math.nan, **levels, **nothing, enough=None, status=status)
    adjusted = alpha / m_comparisons
    needed = (
        (None, None)
        if target is None
        else tuple(questions_needed(sd, target, a, power) for a in (alpha, adjusted))
    )
    return PowerResult(
        n=diff.size,
        sd=sd,
        **levels,
        mde=minimum_detectable_difference(sd, diff.size, alpha, power),
        mde_adjusted=minimum_detectable_difference(sd, diff.size, adjusted, power),
        n_needed=needed[0],
        n_needed_adjusted=needed[1],
        enough=None if needed[1] is None else diff.size >= needed[1],
        status="ok",
    )
