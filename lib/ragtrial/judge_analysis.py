"""Tables from judge runs (pure functions over the frames ragtrial.judge returns): the unbiased
protocol's per-trial win/tie/loss and what the paper reports from it, the classic protocol's win
rates, and the three bias audits (position, length, trial) with the sentences a report states.

Every statistic comes from ragtrial.stats. Questions with a failed judge call in a trial are left
out of that trial (and counted); nothing failed is scored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ragtrial import stats
from ragtrial.judge import METHOD_KEY, Judgments, pair_label, word_count

ALIGNMENT_OUTCOMES = (
    "aligned as generated",
    "aligned by regeneration",
    "aligned by forced append",
    "discarded",
    "failed",
)


def alignment_summary(log: pd.DataFrame) -> pd.DataFrame:
    """Per method pair: how many pairs were aligned as they were, by regeneration, by forced
    append, discarded, or failed; the paper aligns about 85% of its pairs.
    """
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
        stats.trial_win_rates(group.rename(columns={"total_a": "score_a", "total_b": "score_b"})).assign(
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
    box = stats.box_stats(trials["relative_win_rate"])
    codes = outcomes["outcome"].map(stats.OUTCOME_CODES).groupby(outcomes["question_id"]).mean()
    rwr = stats.bootstrap_mean_ci(codes, resamples, seed=seed)
    per_question = outcomes.groupby("question_id")[["overall_a", "overall_b"]].mean()
    diff = stats.paired_bootstrap_diff(
        per_question["overall_a"], per_question["overall_b"], resamples, seed=seed
    )
    test = stats.paired_test(per_question["overall_a"], per_question["overall_b"])
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


def aggregate_unbiased(
    run: Judgments, resamples: int = 2000, alpha: float = 0.05, seed: int = 0
) -> UnbiasedResult:
    """Win/tie/loss per trial and the tables the paper reports, for every method pair judged."""
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
        summary["p_holm"] = stats.holm_correction(summary["p_value"].tolist(), alpha)["p_holm"].to_numpy()
        summary.insert(0, "pair", [pair_label(r) for r in summary.itertuples(index=False)])
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


def classic_summary(run: Judgments, resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per (pair, position, criterion): A's and B's wins, A's win rate, the relative win rate with
    an interval over questions, and how often the answer shown first won.
    """
    rows = []
    for key, group in run.judgments.groupby([*METHOD_KEY, "position", "aspect"], sort=False):
        outcomes = np.where(group["winner"] == "a", "win", "loss")
        ci = stats.bootstrap_relative_win_rate(list(outcomes), n_resamples=resamples, seed=seed)
        wins_a = int((outcomes == "win").sum())
        rows.append(
            dict(zip([*METHOD_KEY, "position", "aspect"], key, strict=True))
            | {
                "n": len(group),
                "wins_a": wins_a,
                "wins_b": len(group) - wins_a,
                "win_rate_a": wins_a / len(group),
                "relative_win_rate": stats.relative_win_rate(wins_a, 0, len(group) - wins_a),
                "rwr_ci_low": ci.low,
                "rwr_ci_high": ci.high,
                "first_slot_win_rate": float((group["winner_slot"] == 1).mean()),
            }
        )
    table = pd.DataFrame(rows)
    if not table.empty:
        table.insert(0, "pair", [pair_label(r) for r in table.itertuples(index=False)])
    return table


LENGTH_GAP_BINS = (0, 5, 10, 25, 50, math.inf)


def length_bias(
    pairs: pd.DataFrame, run: Judgments, bins: Sequence[float] = LENGTH_GAP_BINS, aspect: str = "overall"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Did the longer answer win, as a function of the word gap (the paper's Fig. 6)? Judged on
    unaligned pairs in both orders, so position bias averages out. Returns one row per verdict
    (pairs of equal length have no longer answer and are left out) and the win rate per gap bin.
    """
    words = pairs.assign(words_a=pairs["text_a"].map(word_count), words_b=pairs["text_b"].map(word_count))
    verdicts = run.judgments[run.judgments["aspect"] == aspect].merge(
        words[[*METHOD_KEY, "question_id", "words_a", "words_b"]], on=[*METHOD_KEY, "question_id"]
    )
    gap = verdicts["words_a"] - verdicts["words_b"]
    verdicts = verdicts.assign(gap=gap.abs(), longer=np.where(gap > 0, "a", "b"))[gap != 0]
    verdicts["longer_won"] = verdicts["winner"] == verdicts["longer"]
    verdicts["gap_bin"] = pd.cut(verdicts["gap"], list(bins), right=False).astype(str)
    binned = (
        verdicts.groupby("gap_bin", sort=False, observed=True)
        .agg(
            verdicts=("longer_won", "size"), longer_win_rate=("longer_won", "mean"), mean_gap=("gap", "mean")
        )
        .reset_index()
        .sort_values("mean_gap")
    )
    return verdicts, binned


# ---------------------------------------------------------------- audits and what they support


def _supports(low: float, high: float) -> str:
    return (
        "consistent with a tie (interval includes zero)"
        if low <= 0 <= high
        else ("A better (interval above zero)" if low > 0 else "B better (interval below zero)")
    )


def sanity_table(classic: pd.DataFrame, unbiased: pd.DataFrame) -> pd.DataFrame:
    """Per pair and protocol: relative win rate of A with its 95% interval over questions (classic:
    overall verdicts with A shown first; unbiased: mean over trials) and win/tie/loss rates.
    """
    shown_first = classic[(classic["aspect"] == "overall") & (classic["position"] == "AB")]
    rows = [
        {
            "pair": r.pair,
            "protocol": "classic",
            "questions": r.n,
            "relative_win_rate": r.relative_win_rate,
            "ci_low": r.rwr_ci_low,
            "ci_high": r.rwr_ci_high,
            "win_rate": r.win_rate_a,
            "tie_rate": 0.0,
            "loss_rate": 1 - r.win_rate_a,
        }
        for r in shown_first.itertuples(index=False)
    ]
    rows += [
        {
            "pair": r.pair,
            "protocol": "unbiased",
            "questions": r.questions_judged,
            "relative_win_rate": r.relative_win_rate,
            "ci_low": r.rwr_ci_low,
            "ci_high": r.rwr_ci_high,
            "win_rate": r.win_rate,
            "tie_rate": r.tie_rate,
            "loss_rate": r.loss_rate,
        }
        for r in unbiased.itertuples(index=False)
    ]
    table = pd.DataFrame(
        rows,
        columns=[
            "pair",
            "protocol",
            "questions",
            "relative_win_rate",
            "ci_low",
            "ci_high",
            "win_rate",
            "tie_rate",
            "loss_rate",
        ],
    )
    return table.assign(
        verdict=[_supports(lo, hi) for lo, hi in zip(table["ci_low"], table["ci_high"], strict=True)]
    )


def position_table(classic: pd.DataFrame, positions: pd.DataFrame) -> pd.DataFrame:
    """Per pair, protocol and order: A's win rate and how often the answer shown first won
    (unbiased: when the scores of that order alone decide; ties apart). Without position bias
    A's win rate is about the same in both orders (the paper's Fig. 2 compares AB with BA).
    """
    overall = classic[classic["aspect"] == "overall"]
    rows = [
        {
            "pair": r.pair,
            "protocol": "classic",
            "order": r.position,
            "a_win_rate": r.win_rate_a,
            "first_shown_win_rate": r.first_slot_win_rate,
            "tie_rate": 0.0,
        }
        for r in overall.itertuples(index=False)
    ]
    rows += [
        {
            "pair": pair_label(r),
            "protocol": "unbiased, one order alone",
            "order": r.position,
            "a_win_rate": r.win_rate,
            "first_shown_win_rate": r.win_rate if r.position == "AB" else r.loss_rate,
            "tie_rate": r.tie_rate,
        }
        for r in positions.itertuples(index=False)
    ]
    return pd.DataFrame(
        rows, columns=["pair", "protocol", "order", "a_win_rate", "first_shown_win_rate", "tie_rate"]
    )


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


def failure_sentence(failures: pd.DataFrame, judged_calls: int) -> str:
    if failures.empty:
        return f"All {judged_calls} judge calls returned a usable reply."
    kinds = ", ".join(f"{k} {n}" for k, n in failures["kind"].value_counts().items())
    excluded = failures[failures["stage"] == "judge_unbiased"].drop_duplicates(
        [*METHOD_KEY, "trial", "question_id"]
    )
    return (
        f"{len(failures)} of {judged_calls} judge calls failed after the repair round ({kinds}); they are "
        f"listed in the failures table, and {len(excluded)} (question, trial) judgment(s) of the unbiased "
        "protocol were left out of their trial instead of being scored."
    )


EMBEDDED_NOTE = (
    "All verdicts here come from the embedded Gemma 3 270M base model: they show that the protocol "
    "runs end to end and what each audit measures, not how a capable judge behaves."
)


def audit_findings(
    sanity: pd.DataFrame,
    positions: pd.DataFrame,
    length_bins: pd.DataFrame,
    trials: pd.DataFrame,
    alignment: str,
    failures: str,
    embedded: bool,
) -> str:
    """The narrative of notebook 06, generated from its tables."""
    lines = []
    for r in sanity.itertuples(index=False):
        lines.append(
            f"**Sanity check, {r.protocol}** ({r.pair}, {r.questions} questions): relative win rate of run A "
            f"{_rwr(r)}, win/tie/loss {_pct(r.win_rate)}/{_pct(r.tie_rate)}/{_pct(r.loss_rate)}: "
            f"{r.verdict}."
            + (
                ""
                if r.ci_low <= 0 <= r.ci_high
                else " Both runs are the same method, so this difference is a false finding."
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
            f"{_pct(first.get('AB', np.nan))} and {_pct(first.get('BA', np.nan))} of the questions in the two "
            "orders. Without position bias the difference is near zero."
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
        box = stats.box_stats(trials["relative_win_rate"])
        lines.append(
            f"**Trials**: over {len(trials)} trials the relative win rate ranged from "
            f"{trials['relative_win_rate'].min():+.2f} to {trials['relative_win_rate'].max():+.2f} (median "
            f"{box.median:+.2f}, quartiles {box.q1:+.2f} to {box.q3:+.2f}): one trial could have reported "
            "any of these."
        )
    lines += [alignment, failures] + ([EMBEDDED_NOTE] if embedded else [])
    return "\n\n".join(line for line in lines if line)


def comparison_findings(
    sanity: pd.DataFrame,
    summary: pd.DataFrame,
    aspects: pd.DataFrame,
    alignment: str,
    failures: str,
    embedded: bool,
) -> str:
    """The narrative of notebook 07: per pair, what each protocol supports and whether they agree."""
    lines = []
    for pair, g in sanity.groupby("pair", sort=False):
        by = g.set_index("protocol")
        parts = [
            f"{p} {_rwr(r)}: {r.verdict}" for p, r in zip(by.index, by.itertuples(index=False), strict=True)
        ]
        line = f"**{pair}**: relative win rate " + "; ".join(parts) + "."
        if {"classic", "unbiased"} <= set(by.index) and by.loc["classic", "verdict"] != by.loc[
            "unbiased", "verdict"
        ]:
            line += " The two protocols support different conclusions on the same answers."
        lines.append(line)
    for r in summary.itertuples(index=False):
        lines.append(
            f"{r.pair}: per-question overall score difference {r.score_diff:+.2f} "
            f"[{r.score_diff_ci_low:+.2f}, {r.score_diff_ci_high:+.2f}] ({r.test}, p={r.p_value:.3g}, "
            f"Holm-adjusted over {len(summary)} pair(s) {r.p_holm:.3g}); mean tie rate over trials "
            f"{_pct(r.tie_rate)}."
        )
    if not aspects.empty:
        ties = aspects.groupby("aspect", sort=False)["tie_rate"].mean()
        lines.append(
            "Tie rate per aspect (mean over pairs and trials): "
            + ", ".join(f"{a} {_pct(t)}" for a, t in ties.items())
            + "."
        )
    lines += [alignment, failures] + ([EMBEDDED_NOTE] if embedded else [])
    return "\n\n".join(line for line in lines if line)
