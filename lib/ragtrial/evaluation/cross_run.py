"""The same method in two runs on the same questions: a run that varies a setting (a grid point, a
params file's variation) against the run it varies, per method and measure. Pure functions over two
runs' per-question score tables (`evaluation.score_tables.score_qa`'s: question_id, method, failure
and one column per measure); reading the runs is the caller's.

Each row pairs one method's scores in the `reference` run with its scores in the `varied` run on the
questions both answered: mean difference (varied - reference) with a paired bootstrap interval, the
measure's paired test (McNemar for a 0/1 measure, Wilcoxon otherwise: `answer_metrics.METRICS`),
Holm across the table's rows of the same measure, and the kit's one claim rule
(`stats.claim_supported`). Two runs asked different questions are not paired: that is an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ragtrial.evaluation.answer_metrics import metric_entry
from ragtrial.stats import paired_comparison_table, with_holm_claims

REFERENCE, VARIED = "reference", "varied"
CROSS_RUN_COLUMNS = [
    "method",
    "metric",
    "n",
    "reference_mean",
    "varied_mean",
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


def question_set_difference(reference: pd.DataFrame, varied: pd.DataFrame) -> str:
    """Why two runs' score tables cannot be paired ("" when both asked the same questions)."""
    ours, theirs = set(reference["question_id"]), set(varied["question_id"])
    if ours == theirs:
        return ""
    return (
        f"the runs asked different questions: {len(ours - theirs)} only in the reference run, "
        f"{len(theirs - ours)} only in the varied run ({len(ours & theirs)} shared)"
    )


def paired_across_runs(
    references: Mapping[str, pd.DataFrame],
    varied: pd.DataFrame,
    metrics: Sequence[str],
    n_resamples: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Per reference run (by name), method run in both and measure of `metrics`: the varied run
    against the reference run on the questions both answered (a failed answer or an unmeasured
    question, NaN, leaves the pair out; `n` says how many stayed). `p_holm` adjusts across the rows
    of one measure (every reference and method); `supported` is the claim rule. Raises ValueError
    when a reference run asked other questions than the varied run.
    """
    for name, reference in references.items():
        if why := question_set_difference(reference, varied):
            raise ValueError(f"cannot pair the varied run with {name}: {why}")
    rows = [
        {"reference": name} | row
        for name, reference in references.items()
        for metric in metrics
        for row in _metric_rows(reference, varied, metric, n_resamples, seed)
    ]
    table = pd.DataFrame(rows, columns=["reference", *CROSS_RUN_COLUMNS])
    if table.empty:
        return table.assign(p_holm=pd.Series(dtype=float), supported=pd.Series(dtype=bool))
    return with_holm_claims(table, alpha, family="metric")


def _metric_rows(
    reference: pd.DataFrame, varied: pd.DataFrame, metric: str, n_resamples: int, seed: int
) -> list[dict[str, Any]]:
    """One row per method both runs scored on `metric` (a method without a value for it, such as the
    passage recall of closed book, has no row).
    """
    both = pd.merge(
        reference[["question_id", "method", metric]],
        varied[["question_id", "method", metric]],
        on=["question_id", "method"],
        suffixes=(f"_{REFERENCE}", f"_{VARIED}"),
        validate="one_to_one",
    )
    binary = metric_entry(metric).metadata["paired_test"] == "mcnemar"
    rows = []
    for method, pair in both.groupby("method", sort=False):
        pair = pair.dropna()
        if pair.empty:
            continue
        columns = {f"{metric}_{REFERENCE}": REFERENCE, f"{metric}_{VARIED}": VARIED}
        long = pair.rename(columns=columns).melt(
            id_vars="question_id", value_vars=[REFERENCE, VARIED], var_name="method", value_name="score"
        )
        compared = paired_comparison_table(long, REFERENCE, binary, n_resamples, seed=seed).iloc[0]
        means = {f"{side}_mean": float(pair[f"{metric}_{side}"].mean()) for side in (REFERENCE, VARIED)}
        rows.append(
            {"method": method, "metric": metric}
            | means
            | {c: compared[c] for c in CROSS_RUN_COLUMNS if c not in ("method", "metric", *means)}
        )
    return rows
