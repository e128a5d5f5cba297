"""The judge bias audits: position (AB vs BA), length (verdicts by word gap) and the
self-vs-self sanity check, each as a table with its interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ragtrial.evaluation.judge.pairs import METHOD_KEY, pair_label, word_count
from ragtrial.evaluation.judge.protocols import Judgments
from ragtrial.stats import CLAIM_ALPHA, claim_supported, claim_text, detectable_from_interval

LENGTH_GAP_BINS = (0, 5, 10, 25, 50, math.inf)
# The power at which a sanity check states the difference it could have detected (the conventional 80%).
AUDIT_POWER = 0.8


def length_bias(
    pairs: pd.DataFrame, run: Judgments, bins: Sequence[float] = LENGTH_GAP_BINS, aspect: str = "overall"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Did the longer answer win, as a function of the word gap (the paper's Fig. 6)? Judged on
    unaligned pairs in both orders, so position bias averages out. Returns one row per verdict
    (pairs of equal length have no longer answer, and ties no winner: both are left out) and the
    win rate per gap bin.
    """
    words = pairs.assign(words_a=pairs["text_a"].map(word_count), words_b=pairs["text_b"].map(word_count))
    verdicts = run.judgments[run.judgments["aspect"] == aspect].merge(
        words[[*METHOD_KEY, "question_id", "words_a", "words_b"]], on=[*METHOD_KEY, "question_id"]
    )
    gap = verdicts["words_a"] - verdicts["words_b"]
    verdicts = verdicts.assign(gap=gap.abs(), longer=np.where(gap > 0, "a", "b"))[
        (gap != 0) & (verdicts["winner"] != "tie")
    ]
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


def _supports(low: float, high: float, p_holm: float) -> str:
    """The claim rule on a pair: the relative win rate's interval and the Holm-adjusted test."""
    return claim_text(low, high, p_holm, "A better" if low > 0 else "B better")


def sanity_table(classic: pd.DataFrame, unbiased: pd.DataFrame) -> pd.DataFrame:
    """Per pair and protocol: relative win rate of A with its 95% interval over questions (classic:
    overall verdicts with A shown first, ties when the judge may call them; unbiased: mean over
    trials), win/tie/loss rates, the protocol's Holm-adjusted p-value and the claim rule's verdict,
    and its power: `detectable_difference`, the relative win rate its test detects with
    `detection_power` at `detection_alpha` (`stats.detectable_from_interval`, from the interval's width;
    NaN when the interval has no width), so that "no difference" says how large a bias could go unseen.
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
            "tie_rate": r.tie_rate,
            "loss_rate": r.loss_rate,
            "p_holm": r.p_holm,
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
            "p_holm": r.p_holm,
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
            "p_holm",
        ],
    )
    return table.assign(
        verdict=[
            _supports(lo, hi, p)
            for lo, hi, p in zip(table["ci_low"], table["ci_high"], table["p_holm"], strict=True)
        ],
        supported=[
            claim_supported(lo, hi, p)
            for lo, hi, p in zip(table["ci_low"], table["ci_high"], table["p_holm"], strict=True)
        ],
        detectable_difference=[
            detectable_from_interval(lo, hi, CLAIM_ALPHA, AUDIT_POWER)
            for lo, hi in zip(table["ci_low"], table["ci_high"], strict=True)
        ],
        detection_power=AUDIT_POWER,
        detection_alpha=CLAIM_ALPHA,
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
            "tie_rate": r.tie_rate,
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


ORDER_FLIP_COLUMNS = ["pair", "aspect", "questions", "a_first_score", "b_first_score", "flip"]


def order_flip_table(classic: pd.DataFrame) -> pd.DataFrame:
    """Per pair and criterion judged in both fixed orders (seed 000's Fig. 2): A's win rate
    (classic_summary's score_a: win 1, tie 1/2) with A shown first and with B shown first, and the
    flip between them (A-first minus B-first; about zero without position bias).
    """
    rows = []
    for (pair, aspect), g in classic.groupby(["pair", "aspect"], sort=False):
        by_order = g.set_index("position")
        if not {"AB", "BA"} <= set(by_order.index):
            continue
        first, second = by_order.loc["AB"], by_order.loc["BA"]
        rows.append(
            {
                "pair": pair,
                "aspect": aspect,
                "questions": int(min(first["questions"], second["questions"])),
                "a_first_score": float(first["score_a"]),
                "b_first_score": float(second["score_a"]),
                "flip": float(first["score_a"] - second["score_a"]),
            }
        )
    return pd.DataFrame(rows, columns=ORDER_FLIP_COLUMNS)
