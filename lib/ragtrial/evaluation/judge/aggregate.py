"""Tables from judge runs (pure functions over the judgment frames): the unbiased protocol's
per-trial win/tie/loss and what the paper reports from it, the all-pairs matrix, and the classic
protocol's win rates. Every statistic comes from ragtrial.stats; questions with a failed judge
call in a trial are left out of that trial (and counted), nothing failed is scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ragtrial.evaluation.judge.pairs import METHOD_KEY, NOT_ALIGNABLE, pair_label
from ragtrial.evaluation.judge.protocols import CLASSIC_OUTCOME, Judgments
from ragtrial.stats import (
    OUTCOME_CODES,
    bootstrap_mean_ci,
    box_stats,
    holm_correction,
    paired_bootstrap_diff,
    paired_test,
    relative_win_rate,
    trial_win_rates,
    wilcoxon_signed_rank,
)

ALIGNMENT_OUTCOMES = (
    "aligned as generated",
    "aligned by regeneration",
    "aligned by forced append",
    "discarded",
    NOT_ALIGNABLE,
    "failed",
)


def alignment_summary(log: pd.DataFrame) -> pd.DataFrame:
    """Per method pair: how many pairs were aligned as they were, by regeneration, by forced
    append, discarded, or failed; the paper aligns about 85% of its pairs.
    """
    if log.empty:  # no pair to align (every answer failed): the table's columns, no row
        return pd.DataFrame(
            columns=["pair", *ALIGNMENT_OUTCOMES, "pairs", "aligned_share", "mean_gap_before"]
        )
    table = log.assign(
        pair=[pair_label(r) for r in log.itertuples(index=False)],
        outcome=np.select(
            [log["status"] != "aligned", log["forced"], log["regenerations"] > 0],
            [log["status"], ALIGNMENT_OUTCOMES[2], ALIGNMENT_OUTCOMES[1]],
            ALIGNMENT_OUTCOMES[0],
        ),
    )
    counts = table.pivot_table(
        index="pair", columns="outcome", values="question_id", aggfunc="count", fill_value=0
    )
    counts["pairs"] = counts.sum(axis=1)
    counts["aligned_share"] = table.groupby("pair")["status"].apply(lambda s: (s == "aligned").mean())
    counts["mean_gap_before"] = table.groupby("pair")["gap_before"].mean()
    return counts.reset_index()


# ---------------------------------------------------------------- aggregation: unbiased protocol


@dataclass
class UnbiasedResult:
    outcomes: pd.DataFrame  # per (pair, trial, question): overall scores and A's outcome
    trials: pd.DataFrame  # per (pair, trial): win/tie/loss counts and rates, questions excluded
    summary: pd.DataFrame  # per pair: rates over trials, trial spread, intervals, paired test, Holm
    aspects: pd.DataFrame  # per (pair, aspect): win/tie/loss rates (mean over trials)
    by_type: pd.DataFrame  # per (pair, question_type): win/tie/loss rates (mean over trials)
    positions: pd.DataFrame  # per (pair, position): A's rates judged from one order alone


def _judged(run: Judgments) -> pd.DataFrame:
    """Judgments of the questions that had no failed call in their trial."""
    on = [*METHOD_KEY, "trial", "question_id"]
    failed = run.failures[on].drop_duplicates().assign(excluded=True)
    merged = run.judgments.merge(failed, on=on, how="left")
    return merged[merged["excluded"].isna()].drop(columns="excluded")


def question_outcomes(run: Judgments, by: Sequence[str] = ()) -> pd.DataFrame:
    """Per (pair, trial, question[, by]): each answer's score total over aspects, positions and
    repeats; overall_a / overall_b = total / calls (= the sum over aspects of the mean over
    positions and repeats); A's outcome compares the integer totals, so ties are exact.
    """
    keys = [*METHOD_KEY, "trial", "question_id", "question_type", *by]
    judged = _judged(run)
    calls = (
        judged.drop_duplicates([*keys, "position", "repeat"]).groupby(keys, sort=False).size().rename("calls")
    )
    totals = judged.groupby(keys, sort=False)[["score_a", "score_b"]].sum()
    out = totals.rename(columns={"score_a": "total_a", "score_b": "total_b"}).join(calls).reset_index()
    diff = out["total_a"] - out["total_b"]
    out["outcome"] = np.select([diff > 0, diff < 0], ["win", "loss"], "tie")
    return out.assign(overall_a=out["total_a"] / out["calls"], overall_b=out["total_b"] / out["calls"])


def _trial_rates(outcomes: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """stats.trial_win_rates within every group of `by`, on the integer totals."""
    parts = [
        trial_win_rates(group.rename(columns={"total_a": "score_a", "total_b": "score_b"})).assign(
            **dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        )
        for key, group in outcomes.groupby(list(by), sort=False)
    ]
    columns = [
        *by,
        "trial",
        "n",
        "win",
        "tie",
        "loss",
        "win_rate",
        "tie_rate",
        "loss_rate",
        "relative_win_rate",
    ]
    return pd.concat(parts)[columns] if parts else pd.DataFrame(columns=columns)


def _mean_over_trials(trials: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    rates = ["win_rate", "tie_rate", "loss_rate", "relative_win_rate"]
    return (
        trials.groupby(list(by), sort=False)
        .agg(trials=("trial", "nunique"), questions=("n", "mean"), **{r: (r, "mean") for r in rates})
        .reset_index()
    )


def _pair_summary(outcomes: pd.DataFrame, trials: pd.DataFrame, resamples: int, seed: int) -> dict:
    """Trial spread of the relative win rate; its interval over questions (each question's outcome
    coded win=+1, tie=0, loss=-1 and averaged over the trials that judged it, then resampled by
    question: the mean of these codes is the mean relative win rate over trials); and a paired
    test on per-question mean overall scores.
    """
    box = box_stats(trials["relative_win_rate"])
    codes = outcomes["outcome"].map(OUTCOME_CODES).groupby(outcomes["question_id"]).mean()
    rwr = bootstrap_mean_ci(codes, resamples, seed=seed)
    per_question = outcomes.groupby("question_id")[["overall_a", "overall_b"]].mean()
    diff = paired_bootstrap_diff(per_question["overall_a"], per_question["overall_b"], resamples, seed=seed)
    test = paired_test(per_question["overall_a"], per_question["overall_b"])
    return {
        "rwr_median": box.median,
        "rwr_q1": box.q1,
        "rwr_q3": box.q3,
        "rwr_whisker_low": box.whisker_low,
        "rwr_whisker_high": box.whisker_high,
        "rwr_outlier_trials": len(box.outliers),
        "rwr_ci_low": rwr.low,
        "rwr_ci_high": rwr.high,
        "questions_judged": rwr.n,
        "score_diff": diff.mean,
        "score_diff_ci_low": diff.low,
        "score_diff_ci_high": diff.high,
        "test": test.method,
        "p_value": test.p_value,
    }


def unbiased_summary(
    run: Judgments, resamples: int = 2000, alpha: float = 0.05, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The outcomes, trials and summary tables of `aggregate_unbiased` alone (its other tables cost
    as much again; the calibration of notebook 12 reads only the summary, thousands of times).
    """
    outcomes = question_outcomes(run)
    trials = _trial_rates(outcomes, METHOD_KEY)
    excluded = (
        run.failures.groupby([*METHOD_KEY, "trial"])["question_id"].nunique().rename("excluded").reset_index()
    )
    trials = trials.merge(excluded, on=[*METHOD_KEY, "trial"], how="left").fillna({"excluded": 0})
    rows = []
    for key, group in outcomes.groupby(METHOD_KEY, sort=False):
        pair_trials = trials[(trials[METHOD_KEY] == pd.Series(key, index=METHOD_KEY)).all(axis=1)]
        rows.append(
            dict(zip(METHOD_KEY, key, strict=True)) | _pair_summary(group, pair_trials, resamples, seed)
        )
    summary = _mean_over_trials(trials, METHOD_KEY)
    summary = summary.merge(trials.groupby(METHOD_KEY)["excluded"].sum().reset_index(), on=METHOD_KEY)
    if rows:
        summary = summary.merge(pd.DataFrame(rows), on=METHOD_KEY)
        summary["p_holm"] = holm_correction(summary["p_value"].tolist(), alpha)["p_holm"].to_numpy()
        summary.insert(0, "pair", [pair_label(r) for r in summary.itertuples(index=False)])
    return outcomes, trials, summary


def aggregate_unbiased(
    run: Judgments, resamples: int = 2000, alpha: float = 0.05, seed: int = 0
) -> UnbiasedResult:
    """Win/tie/loss per trial and the tables the paper reports, for every method pair judged."""
    outcomes, trials, summary = unbiased_summary(run, resamples, alpha, seed)
    return UnbiasedResult(
        outcomes=outcomes,
        trials=trials,
        summary=summary,
        aspects=_mean_over_trials(
            _trial_rates(question_outcomes(run, ["aspect"]), [*METHOD_KEY, "aspect"]), [*METHOD_KEY, "aspect"]
        ),
        by_type=_mean_over_trials(
            _trial_rates(outcomes, [*METHOD_KEY, "question_type"]), [*METHOD_KEY, "question_type"]
        ),
        positions=_mean_over_trials(
            _trial_rates(question_outcomes(run, ["position"]), [*METHOD_KEY, "position"]),
            [*METHOD_KEY, "position"],
        ),
    )


def all_pairs_matrix(
    summary: pd.DataFrame, methods: Sequence[str], value: str = "relative_win_rate"
) -> pd.DataFrame:
    """Row-minus-column relative win rates (row method's advantage); the diagonal is not computed."""
    matrix = pd.DataFrame(np.nan, index=list(methods), columns=list(methods))
    for row in summary.itertuples(index=False):
        matrix.loc[row.method_a, row.method_b] = getattr(row, value)
        matrix.loc[row.method_b, row.method_a] = 0.0 - getattr(row, value)  # 0.0 - x: no "-0.00" for a tie
    return matrix


# ---------------------------------------------------------------- aggregation: classic protocol and audits


CLASSIC_COLUMNS = [
    *METHOD_KEY,
    "position",
    "aspect",
    "questions",
    "n",
    "wins_a",
    "ties",
    "wins_b",
    "win_rate_a",
    "tie_rate",
    "loss_rate",
    "score_a",
    "relative_win_rate",
    "rwr_ci_low",
    "rwr_ci_high",
    "first_slot_win_rate",
    "test",
    "p_value",
    "p_holm",
]
# The GraphRAG paper's win rate: a win counts 1, a tie 1/2, a loss 0, averaged over the repeats.
CLASSIC_SCORE = {"win": 1.0, "tie": 0.5, "loss": 0.0}


def classic_summary(
    run: Judgments, resamples: int = 2000, seed: int = 0, alpha: float = 0.05
) -> pd.DataFrame:
    """Per (pair, fixed order, criterion), over its votes (questions x repeats): A's wins, ties
    and B's wins with their rates; score_a, the GraphRAG paper's win rate (win 1, tie 1/2);
    the relative win rate with an interval over questions (each question's vote codes averaged
    over its repeats); how often the answer shown first won; and the GraphRAG paper's test, a
    Wilcoxon signed-rank test of the per-question scores of A against B's (1 - A's), with Holm's
    correction across the pairs of each (order, criterion). The orders are never pooled.
    """
    rows = []
    for key, group in run.judgments.groupby([*METHOD_KEY, "position", "aspect"], sort=False):
        outcomes = group["winner"].map(CLASSIC_OUTCOME)
        wins_a, ties = int((outcomes == "win").sum()), int((outcomes == "tie").sum())
        codes = outcomes.map(OUTCOME_CODES).groupby(group["question_id"].to_numpy(), sort=False).mean()
        ci = bootstrap_mean_ci(codes, resamples, seed=seed)
        score = outcomes.map(CLASSIC_SCORE).groupby(group["question_id"].to_numpy(), sort=False).mean()
        test = wilcoxon_signed_rank(score, 1 - score)
        rows.append(
            dict(zip([*METHOD_KEY, "position", "aspect"], key, strict=True))
            | {
                "questions": len(codes),
                "n": len(group),
                "wins_a": wins_a,
                "ties": ties,
                "wins_b": len(group) - wins_a - ties,
                "win_rate_a": wins_a / len(group),
                "tie_rate": ties / len(group),
                "loss_rate": (len(group) - wins_a - ties) / len(group),
                "score_a": float(score.mean()),
                "relative_win_rate": relative_win_rate(wins_a, ties, len(group) - wins_a - ties),
                "rwr_ci_low": ci.low,
                "rwr_ci_high": ci.high,
                "first_slot_win_rate": float((group["winner_slot"] == 1).mean()),
                "test": test.method,
                "p_value": test.p_value,
            }
        )
    table = pd.DataFrame(rows, columns=CLASSIC_COLUMNS)
    for _, family in table.groupby(["position", "aspect"], sort=False):
        holm = holm_correction(family["p_value"].tolist(), alpha)
        table.loc[family.index, "p_holm"] = holm["p_holm"].to_numpy()
    table.insert(0, "pair", [pair_label(r) for r in table.itertuples(index=False)])
    return table
