"""From simulated studies to any question count: the claim rule's two statistics as a normal model, and
the smallest design that reaches a target power at a target false-winner rate.

The claim rule declares A better when A's relative win rate interval lies above zero and the paired
test on overall scores rejects: both statistics are means over questions, the interval's of each
question's outcome code (averaged over trials) and the test's of its score difference. Per protocol and
(M, N), the simulated studies give the mean of the two per-question values, their covariance within a
study (what each study's own interval and test see) and the covariance of study means beyond it (what
a trial shift shared by all questions adds, which no question count removes). At n questions the two
study means are then normal around the mean with covariance within / n + between, and A is declared
when both exceed their critical values t_{n-1} x (within sd) / sqrt(n). `design_check` compares this
with the simulated rates at the simulated question counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ragtrial.evaluation.calibration.model import JudgeModel
from ragtrial.evaluation.calibration.studies import SUMMARY_KEYS

DESIGN_KEYS = ["scenario", "protocol", "trials", "repeats"]
STATISTICS = ["code", "score_diff"]


def design_moments(per_question: pd.DataFrame, symmetric: Collection[tuple[str, str]] = ()) -> pd.DataFrame:
    """Per scenario, protocol and (M, N): the two statistics' means, within-study covariance (pooled
    over studies) and between-study covariance (of study means, less within / questions; clipped to
    be positive semi-definite), from `run_study`'s per-question values. The (scenario, protocol) pairs
    in `symmetric` have means 0 by construction (the unbiased protocol on an A/A scenario: both orders,
    aligned lengths, equal methods), so their simulated means' Monte Carlo noise is not read as a bias
    that a large question count would then declare.
    """
    rows = []
    for key, group in per_question.groupby(DESIGN_KEYS, sort=False):
        studies = [g[STATISTICS].to_numpy(float) for _, g in group.groupby("study", sort=False)]
        n = int(np.mean([len(s) for s in studies]))
        within = np.mean([np.cov(s, rowvar=False) for s in studies if len(s) > 1], axis=0)
        means = np.array([s.mean(axis=0) for s in studies])
        between = np.cov(means, rowvar=False) - within / n if len(studies) > 1 else np.zeros((2, 2))
        values, vectors = np.linalg.eigh(between)
        between = vectors @ np.diag(np.clip(values, 0, None)) @ vectors.T
        mean = np.zeros(2) if tuple(key[:2]) in set(symmetric) else means.mean(axis=0)
        rows.append(
            dict(zip(DESIGN_KEYS, key, strict=True))
            | {
                "studies": len(studies),
                "questions": n,
                "mean_code": mean[0],
                "mean_score_diff": mean[1],
                "within_code": within[0, 0],
                "within_score_diff": within[1, 1],
                "within_cov": within[0, 1],
                "between_code": between[0, 0],
                "between_score_diff": between[1, 1],
                "between_cov": between[0, 1],
            }
        )
    return pd.DataFrame(rows)


def claim_rates(row: Any, n: int, alpha: float) -> tuple[float, float]:  # an itertuples() design_moments row
    """P(the claim rule declares A), P(it declares B) at `n` questions under the design's normal model."""
    mean = np.array([row.mean_code, row.mean_score_diff])
    within = np.array([[row.within_code, row.within_cov], [row.within_cov, row.within_score_diff]])
    between = np.array([[row.between_code, row.between_cov], [row.between_cov, row.between_score_diff]])
    sd = np.sqrt(np.clip(np.diag(within), 0, None))
    if n < 2 or not (sd > 0).all():
        return 0.0, 0.0  # no variation within a study: the paired test cannot reject (p = 1)
    critical = stats.t.ppf(1 - alpha / 2, n - 1) * sd / math.sqrt(n)
    cov = within / n + between
    sdv = np.sqrt(np.diag(cov))
    rho = cov[0, 1] / (sdv[0] * sdv[1])
    rates = []
    for sign in (1.0, -1.0):
        z = (sign * mean - critical) / sdv  # standardized distance above the critical values
        if rho > 1 - 1e-9:  # one statistic twice (the classic protocol's code is its score)
            rates.append(float(stats.norm.cdf(z.min())))
        else:
            joint = stats.multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]])
            rates.append(float(joint.cdf(z)))
    return rates[0], rates[1]


def design_check(summary: pd.DataFrame, design: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """At every simulated (scenario, protocol, M, N, questions): the winner rate the studies showed
    beside the one the normal model predicts from the largest question count's moments.
    """
    merged = summary.merge(design.drop(columns=["questions", "studies"]), on=DESIGN_KEYS)
    predicted = [sum(claim_rates(r, int(r.questions), alpha)) for r in merged.itertuples(index=False)]
    return merged[[*SUMMARY_KEYS, "studies", "winner_rate", "winner_rate_low", "winner_rate_high"]].assign(
        predicted_winner_rate=predicted
    )


# ---------------------------------------------------------------- the recommendation


@dataclass(frozen=True)
class Targets:
    power: float  # P(declaring the truly better method) at the effect scenario
    false_winner: float  # P(declaring any winner) at the A/A scenario
    max_questions: int  # the largest question count considered


RECOMMENDATION_COLUMNS = [
    "protocol",
    "trials",
    "repeats",
    "questions",
    "power",
    "false_winner_rate",
    "meets_targets",
    "why_not",
    "judge_calls",
    "cost",
    "wall_s",
    "chosen",
]
# (protocol, trials, repeats, questions) -> {"judge_calls", "cost", "wall_s"} of judging one method pair
Costing = Callable[[str, int, int, int], dict[str, float | None]]


def questions_needed(
    row: Any,  # an itertuples() row of design_moments
    power: float,
    alpha: float,
    max_questions: int,
) -> int | None:
    """The smallest question count at which the design declares the better method with `power` (the
    effect's sign says which), or None when `max_questions` are not enough.
    """
    side = 0 if row.mean_code >= 0 else 1

    def reaches(n: int) -> bool:
        return claim_rates(row, n, alpha)[side] >= power

    if not reaches(max_questions):
        return None
    low, high = 2, max_questions  # power rises with n: bisection
    if reaches(low):
        return low
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid, high)
    return high


def recommend(
    design: pd.DataFrame,
    effect: str,
    null: str,
    targets: Targets,
    alpha: float,
    costing: Costing,
) -> pd.DataFrame:
    """Per protocol and (M, N) simulated: the question count that reaches `targets.power` on scenario
    `effect`, the false-winner rate at that count on the A/A scenario `null`, whether both targets are
    met, and the cost of judging one pair at that design; the cheapest design meeting both is
    `chosen` (by cost, else by judge calls).
    """
    rows = []
    for row in design[design["scenario"] == effect].itertuples(index=False):
        key = (row.protocol, row.trials, row.repeats)
        null_rows = design[
            (design["scenario"] == null)
            & (design["protocol"] == row.protocol)
            & (design["trials"] == row.trials)
            & (design["repeats"] == row.repeats)
        ]
        n = questions_needed(row, targets.power, alpha, targets.max_questions)
        shown = n or targets.max_questions
        false_rate = sum(claim_rates(next(null_rows.itertuples(index=False)), shown, alpha))
        why = (
            f"power stays below {targets.power:.0%} up to {targets.max_questions} questions"
            if n is None
            else f"false-winner rate {false_rate:.0%} above {targets.false_winner:.0%}"
            if false_rate > targets.false_winner
            else ""
        )
        cost = costing(row.protocol, row.trials, row.repeats, shown)
        rows.append(
            {
                "protocol": key[0],
                "trials": key[1],
                "repeats": key[2],
                "questions": n,
                "power": claim_rates(row, shown, alpha)[0 if row.mean_code >= 0 else 1],
                "false_winner_rate": false_rate,
                "meets_targets": not why,
                "why_not": why,
                **cost,
            }
        )
    table = pd.DataFrame(rows, columns=RECOMMENDATION_COLUMNS[:-1])
    table["chosen"] = False
    feasible = table[table["meets_targets"]]
    if not feasible.empty:
        by = "cost" if feasible["cost"].notna().all() else "judge_calls"
        table.loc[feasible.sort_values([by, "judge_calls"]).index[0], "chosen"] = True
    return table


# ---------------------------------------------------------------- the classic protocol in closed form


def classic_first_shown_probability(
    model: JudgeModel, difference: float = 0.0, length_gap_words: float = 0.0, length_sd_words: float = 0.0
) -> float:
    """P(the classic judge picks the answer shown first) on one question, overall, without trial
    variation: A shown first, A better by `difference` on every aspect, A's answers longer by a gap
    that is normal around `length_gap_words` with sd sqrt(2) x `length_sd_words` (two answers' spread).
    Closed form: Phi((shift + difference + length_bias x gap) / sqrt(spread^2 + (length_bias x gap sd)^2)).
    """
    gap_sd = model.length_bias * math.sqrt(2) * length_sd_words
    mean = model.classic_position_shift + difference + model.length_bias * length_gap_words
    return float(stats.norm.cdf(mean / math.hypot(model.classic_spread, gap_sd)))


def classic_declared_probability(first_shown: float, questions: int, alpha: float) -> float:
    """P(the classic protocol declares the first-shown method better) when each of `questions`
    independent overall verdicts picks it with probability `first_shown`: its test (Wilcoxon on +-1
    differences, all ranks tied) is the sign test z = (2 wins - n) / sqrt(n), which binds before its
    interval does, so the rate is P(Binomial(n, p) >= the smallest count with z above z_{1-alpha/2}).
    """
    z = stats.norm.ppf(1 - alpha / 2)
    wins = math.floor((questions + z * math.sqrt(questions)) / 2) + 1
    return float(stats.binom.sf(wins - 1, questions, first_shown))
