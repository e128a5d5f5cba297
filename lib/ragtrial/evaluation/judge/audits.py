"""The judge bias audits: position (AB vs BA), length (position-exchanged verdicts by token gap, and
each order's verdicts by word gap for the judge calibration) and the self-vs-self sanity check, each
as a table with its interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ragtrial.evaluation.judge.pairs import METHOD_KEY, pair_label, word_count
from ragtrial.evaluation.judge.protocols import POSITIONS, Judgments
from ragtrial.llm.tokens import count_tokens
from ragtrial.stats import CLAIM_ALPHA, claim_supported, claim_text, detectable_from_interval

# Token gaps (cl100k, as `count_tokens` counts them): Fig. 6's x axis is "the token difference between
# the longer answer and the shorter answer" (answers of about 200 tokens; 25 tokens already matter).
LENGTH_GAP_BINS = (0, 5, 10, 25, 50, math.inf)
# The power at which a sanity check states the difference it could have detected (the conventional 80%).
AUDIT_POWER = 0.8
# What `length_bias` bins, stated in its table: Fig. 6 removes position bias by the paper's position
# exchange of 0-5 scores; the classic judge names a winner per order instead, so an exchanged verdict
# is the answer both orders named, and a tie when the orders disagree.
EXCHANGED_CLASSIC_VERDICTS = (
    "classic overall winner in both orders, exchanged per question: the answer both orders named, a tie "
    "when they disagree (Fig. 6 exchanges the unbiased protocol's 0-5 scores)"
)


def length_verdicts(pairs: pd.DataFrame, run: Judgments, aspect: str = "overall") -> pd.DataFrame:
    """One row per classic verdict in each order on the unaligned pairs, with the word gap and whether
    the longer answer won (pairs of equal length have no longer answer, and ties no winner: both are
    left out). The judge calibration fits its length bias per word on these (`calibration.fit`).
    """
    words = pairs.assign(words_a=pairs["text_a"].map(word_count), words_b=pairs["text_b"].map(word_count))
    verdicts = run.judgments[run.judgments["aspect"] == aspect].merge(
        words[[*METHOD_KEY, "question_id", "words_a", "words_b"]], on=[*METHOD_KEY, "question_id"]
    )
    gap = verdicts["words_a"] - verdicts["words_b"]
    verdicts = verdicts.assign(gap=gap.abs(), longer=np.where(gap > 0, "a", "b"))[
        (gap != 0) & (verdicts["winner"] != "tie")
    ]
    return verdicts.assign(longer_won=verdicts["winner"] == verdicts["longer"])


def position_exchanged_verdicts(run: Judgments, aspect: str = "overall") -> pd.DataFrame:
    """Per (pair, trial, repeat, question) judged by the classic protocol in both orders: the winner
    with position bias removed ('a' or 'b' when both orders named it, else 'tie': each answer's wins
    over the two orders compared, as the paper compares its scores averaged over the two orders).
    A question judged in one order only has nothing to exchange and is left out.
    """
    keys = [*METHOD_KEY, "trial", "repeat", "question_id"]
    judged = run.judgments[run.judgments["aspect"] == aspect]
    counts = judged.assign(
        a_wins=judged["winner"] == "a", b_wins=judged["winner"] == "b", orders=judged["position"]
    )
    per_question = (
        counts.groupby(keys, sort=False)
        .agg(a_wins=("a_wins", "sum"), b_wins=("b_wins", "sum"), orders=("orders", "nunique"))
        .reset_index()
    )
    both = per_question[per_question["orders"] == len(POSITIONS)]
    winner = np.select([both["a_wins"] > both["b_wins"], both["a_wins"] < both["b_wins"]], ["a", "b"], "tie")
    return both[keys].assign(winner=winner)


def length_bias(
    pairs: pd.DataFrame, run: Judgments, bins: Sequence[float] = LENGTH_GAP_BINS, aspect: str = "overall"
) -> pd.DataFrame:
    """Did the longer answer win, as a function of the token gap (the paper's Fig. 6)? The classic
    verdicts on the unaligned pairs in both orders, exchanged per question (`position_exchanged_verdicts`)
    so position bias is removed as in Fig. 6; pairs of equal token length have no longer answer. Per
    gap bin: the exchanged verdicts with a winner, the ties (both left out of the rate), the longer
    answer's win rate among the verdicts with a winner (0.5 without length bias), the mean gap in
    tokens, and what the verdicts are (`EXCHANGED_CLASSIC_VERDICTS`).
    """
    tokens = pairs.assign(
        tokens_a=pairs["text_a"].map(count_tokens), tokens_b=pairs["text_b"].map(count_tokens)
    )
    verdicts = position_exchanged_verdicts(run, aspect).merge(
        tokens[[*METHOD_KEY, "question_id", "tokens_a", "tokens_b"]], on=[*METHOD_KEY, "question_id"]
    )
    gap = verdicts["tokens_a"] - verdicts["tokens_b"]
    verdicts = verdicts.assign(gap=gap.abs(), longer=np.where(gap > 0, "a", "b"))[gap != 0]
    verdicts = verdicts.assign(
        decided=verdicts["winner"] != "tie",
        tied=verdicts["winner"] == "tie",
        longer_won=verdicts["winner"] == verdicts["longer"],
        gap_bin=pd.cut(verdicts["gap"], list(bins), right=False).astype(str),
    )
    binned = (
        verdicts.groupby("gap_bin", sort=False, observed=True)
        .agg(
            verdicts=("decided", "sum"),
            ties=("tied", "sum"),
            longer_wins=("longer_won", "sum"),
            mean_gap_tokens=("gap", "mean"),
        )
        .reset_index()
        .sort_values("mean_gap_tokens")
    )
    rate = binned["longer_wins"] / binned["verdicts"].where(binned["verdicts"] > 0)
    columns = ["gap_bin", "verdicts", "ties", "longer_win_rate", "mean_gap_tokens", "verdicts_from"]
    return binned.assign(longer_win_rate=rate, verdicts_from=EXCHANGED_CLASSIC_VERDICTS)[columns]


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
