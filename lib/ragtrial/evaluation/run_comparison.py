"""Runs measured on the same questions, compared measure by measure: pure functions over the runs'
per-answer observations (`evaluation.verdict_measures.observations`: measure, question_id,
question_type, method, partner, value, status); reading the runs is the caller's
(`runner.compared_runs`).

Each row pairs one (measure, method, partner) of the first run with the same of the second on the
questions both scored ("ok" in both): mean difference (second - first) with a paired bootstrap
interval, the measure's paired test (McNemar for a 0/1 measure, Wilcoxon otherwise), Holm over every
row of the comparison (one family: the user reads them together, `with_claims`) and the kit's claim
rule. Unpaired (runs that asked different questions, compared only when the user asks): each run's ok
values as an independent sample, an unpaired bootstrap interval and Fisher's exact test (0/1) or
Mann-Whitney U.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ragtrial.evaluation.findings import Finding
from ragtrial.stats import (
    claim_text,
    paired_difference,
    unpaired_bootstrap_diff,
    unpaired_test,
    with_holm_claims,
)

FIRST, SECOND = "first", "second"
KEY = ["measure", "method", "partner"]
PAIR = ["first_run", "second_run"]
ROW_COLUMNS = [
    *PAIR,
    *KEY,
    "pairing",
    "n",
    "first_mean",
    "second_mean",
    "mean_diff",
    "ci_low",
    "ci_high",
    "wins",
    "losses",
    "ties",
    "test",
    "statistic",
    "p_value",
]
COMPARISON_COLUMNS = [*ROW_COLUMNS, "p_holm", "supported", "claim"]
FLIP_COLUMNS = [*PAIR, *KEY, "question_id", "question_type", "first_value", "second_value", "flip"]
RIGHT_TO_WRONG, WRONG_TO_RIGHT = "right → wrong", "wrong → right"
PAIRED = "paired"


def question_difference(first: pd.DataFrame, second: pd.DataFrame) -> dict[str, tuple[int, int, int]]:
    """Per measure both runs hold, when their questions differ: (only in the first, only in the second,
    shared) question counts. Empty when every shared measure was asked on the same questions.
    """
    found = {}
    for measure in sorted(set(first["measure"]) & set(second["measure"])):
        ours = set(first.loc[first["measure"] == measure, "question_id"])
        theirs = set(second.loc[second["measure"] == measure, "question_id"])
        if ours != theirs:
            found[measure] = (len(ours - theirs), len(theirs - ours), len(ours & theirs))
    return found


def question_difference_text(first: pd.DataFrame, second: pd.DataFrame, names: tuple[str, str]) -> str:
    """The first measure whose questions differ between the runs (`names`), with its question counts
    ("" when none does).
    """
    differing = question_difference(first, second)
    if not differing:
        return ""
    measure, (only_first, only_second, shared) = next(iter(differing.items()))
    return (
        f"{measure}: {only_first} questions only in {names[0]}, {only_second} only in {names[1]}, "
        f"{shared} shared"
    )


def _ok(observations: pd.DataFrame) -> pd.DataFrame:
    return observations[observations["status"] == "ok"]


def paired_rows(
    first: pd.DataFrame, second: pd.DataFrame, binary: Mapping[str, bool], n_resamples: int, seed: int
) -> list[dict[str, Any]]:
    """One row per (measure, method, partner) both runs scored on at least one shared question."""
    both = pd.merge(
        _ok(first)[[*KEY, "question_id", "value"]],
        _ok(second)[[*KEY, "question_id", "value"]],
        on=[*KEY, "question_id"],
        suffixes=(f"_{FIRST}", f"_{SECOND}"),
        validate="one_to_one",
    )
    rows = []
    for (measure, method, partner), pair in both.groupby(KEY, sort=False):
        theirs, ours = pair[f"value_{SECOND}"].to_numpy(float), pair[f"value_{FIRST}"].to_numpy(float)
        rows.append(
            {"measure": measure, "method": method, "partner": partner, "pairing": PAIRED}
            | {"first_mean": float(ours.mean()), "second_mean": float(theirs.mean())}
            | paired_difference(theirs, ours, binary[measure], n_resamples, seed=seed)
        )
    return rows


def unpaired_rows(
    first: pd.DataFrame, second: pd.DataFrame, binary: Mapping[str, bool], n_resamples: int, seed: int
) -> list[dict[str, Any]]:
    """One row per (measure, method, partner) both runs scored, each run's values a sample of its own
    (`n`: the smaller sample; wins, losses and ties need pairs, so they are empty).
    """
    ours = {k: g["value"].to_numpy(float) for k, g in _ok(first).groupby(KEY, sort=False)}
    theirs = {k: g["value"].to_numpy(float) for k, g in _ok(second).groupby(KEY, sort=False)}
    rows = []
    for key in (k for k in ours if k in theirs):
        second_values, first_values = theirs[key], ours[key]
        ci = unpaired_bootstrap_diff(second_values, first_values, n_resamples, seed=seed)
        test = unpaired_test(second_values, first_values, binary[key[0]])
        rows.append(
            dict(zip(KEY, key, strict=True))
            | {"pairing": f"unpaired ({first_values.size} vs {second_values.size} answers)", "n": ci.n}
            | {"first_mean": float(first_values.mean()), "second_mean": float(second_values.mean())}
            | {"mean_diff": ci.mean, "ci_low": ci.low, "ci_high": ci.high}
            | {"wins": pd.NA, "losses": pd.NA, "ties": pd.NA}
            | {"test": test.method, "statistic": test.statistic, "p_value": test.p_value}
        )
    return rows


def comparison_rows(
    first: pd.DataFrame,
    second: pd.DataFrame,
    binary: Mapping[str, bool],
    names: tuple[str, str] = (FIRST, SECOND),
    *,
    paired: bool = True,
    n_resamples: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """The second run against the first (`names`: their run ids), per measure, method and partner
    (`ROW_COLUMNS`, before Holm): paired on the questions both scored, or unpaired when `paired` is
    False. Raises ValueError when paired runs asked different questions (`question_difference`).
    """
    if paired and (why := question_difference_text(first, second, names)):
        raise ValueError(why)
    rows = (paired_rows if paired else unpaired_rows)(first, second, binary, n_resamples, seed)
    table = pd.DataFrame([{"first_run": names[0], "second_run": names[1]} | row for row in rows])
    return table.reindex(columns=ROW_COLUMNS)


def with_claims(rows: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """`rows` (`comparison_rows`, several pairs concatenated) with `p_holm` over all of them (one family),
    `supported` by the claim rule and its sentence (`COMPARISON_COLUMNS`).
    """
    if rows.empty:
        return pd.DataFrame(columns=COMPARISON_COLUMNS)
    table = with_holm_claims(rows.reset_index(drop=True), alpha)
    table["claim"] = [
        claim_text(r.ci_low, r.ci_high, r.p_holm, _claim(r), alpha) for r in table.itertuples(index=False)
    ]
    return table[COMPARISON_COLUMNS]


def _claim(row: Any) -> str:
    """What a supported row claims, in words."""
    direction = "higher" if row.mean_diff > 0 else "lower"
    against = f" (against {row.partner})" if row.partner else ""
    return f"{row.method}'s {row.measure}{against} is {direction} in {row.second_run} than in {row.first_run}"


def flipped_questions(
    first: pd.DataFrame,
    second: pd.DataFrame,
    binary: Mapping[str, bool],
    names: tuple[str, str] = (FIRST, SECOND),
) -> pd.DataFrame:
    """The questions whose 0/1 measure changed between the runs (both scored them), per method
    (`FLIP_COLUMNS`): right → wrong or wrong → right.
    """
    both = pd.merge(
        _ok(first)[[*KEY, "question_id", "question_type", "value"]],
        _ok(second)[[*KEY, "question_id", "value"]],
        on=[*KEY, "question_id"],
        suffixes=(f"_{FIRST}", f"_{SECOND}"),
    )
    both = both[both["measure"].map(binary).astype(bool)]
    changed = both[both[f"value_{FIRST}"] != both[f"value_{SECOND}"]]
    flips = changed.rename(columns={f"value_{FIRST}": "first_value", f"value_{SECOND}": "second_value"})
    flips = flips.assign(
        first_run=names[0],
        second_run=names[1],
        flip=[RIGHT_TO_WRONG if v > 0 else WRONG_TO_RIGHT for v in flips["first_value"]],
    )
    return flips.reindex(columns=FLIP_COLUMNS).reset_index(drop=True)


# Statements of notebook 14's `findings` table, per pair ("<second> vs <first>").
COMPARED, SUPPORTED, FLIPPED, RUNS_FOUND = (
    "rows compared",
    "claims supported",
    "questions flipped",
    "runs found",
)


def pair_name(first: str, second: str) -> str:
    return f"{second} vs {first}"


def comparison_findings(runs_found: int, comparisons: pd.DataFrame, flips: pd.DataFrame) -> list[Finding]:
    """The counts notebook 14's prose states: the runs it found to compare, the rows compared and the
    claims the claim rule supports (in all, and per pair) and per pair the questions that flipped
    each way.
    """
    found = [
        Finding(RUNS_FOUND, "runs to compare", float(runs_found), "compared_runs"),
        Finding(COMPARED, "rows of the comparison", float(len(comparisons)), "run_comparisons"),
        Finding(
            SUPPORTED,
            "rows the claim rule supports",
            float(comparisons["supported"].sum()),
            "run_comparisons",
        ),
    ]
    for (first, second), rows in comparisons.groupby(PAIR, sort=False):
        pair = pair_name(first, second)
        found += [
            Finding(COMPARED, "rows of the comparison", float(len(rows)), "run_comparisons", pair),
            Finding(
                SUPPORTED,
                "rows the claim rule supports",
                float(rows["supported"].sum()),
                "run_comparisons",
                pair,
            ),
        ]
        pair_flips = flips[(flips["first_run"] == first) & (flips["second_run"] == second)]
        found += [
            Finding(
                FLIPPED,
                f"questions {way}",
                float((pair_flips["flip"] == way).sum()),
                "flipped_questions",
                f"{pair}: {way}",
            )
            for way in (RIGHT_TO_WRONG, WRONG_TO_RIGHT)
        ]
    return found
