"""A grid's points read as one report (notebook 15): pure functions over each point's per-answer
observations (`evaluation.verdict_measures.observations`), keyed by run id in grid order (the first is
the reference) and each point's values of the varied settings; reading the runs is the caller's
(`runner.sweep_runs`).

Every difference is paired on the same questions with `evaluation.run_comparison.comparison_rows`
(the paired bootstrap interval, McNemar or Wilcoxon) and read with the kit's claim rule under Holm
(`with_claims`): one family for the points against the reference, one for the best points against
their runners-up, one for the seed's rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ragtrial.evaluation.findings import Finding
from ragtrial.evaluation.run_comparison import KEY, comparison_rows, with_claims
from ragtrial.stats import bootstrap_mean_ci

# a point: then one column per varied key, its value as JSON (`shown_value`)
POINT_COLUMNS = ["position", "run_id", "label", "status", "reference", "data", "model"]
POINT_MEAN_COLUMNS = ["run_id", *KEY, "n", "mean", "ci_low", "ci_high"]
BEST_COLUMNS = [
    *KEY,
    "points",
    "best_run",
    "best_mean",
    "runner_up_run",
    "runner_up_mean",
    "n",
    "mean_diff",
    "ci_low",
    "ci_high",
    "test",
    "p_value",
    "p_holm",
    "distinguishable",
    "claim",
]
HEATMAP_COLUMNS = [*KEY, "x_key", "x_value", "y_key", "y_value", "points", "mean", "mean_diff"]
SEED_COLUMNS = [
    "variation",
    "compared_with",
    "kit_method",
    "kit_measure",
    "published",
    "published_base",
    "published_difference",
    "kit_run",
    "kit_base_run",
    "n",
    "kit_mean",
    "kit_base_mean",
    "kit_difference",
    "ci_low",
    "ci_high",
    "p_holm",
    "supported",
    "same_direction",
    "published_dataset",
    "source",
]


def shown_value(value: Any) -> str:
    """A setting's value as the sweep's tables show it (JSON: `null`, `20`, `"bm25"`)."""
    return json.dumps(value)


def point_means(observed: Mapping[str, pd.DataFrame], n_resamples: int, seed: int = 0) -> pd.DataFrame:
    """Per point, measure, method and partner: the mean of its scored answers with a bootstrap
    interval (`POINT_MEAN_COLUMNS`).
    """
    rows = []
    for run_id, obs in observed.items():
        ok = obs[obs["status"] == "ok"]
        for key, group in ok.groupby(KEY, sort=False):
            ci = bootstrap_mean_ci(group["value"].to_numpy(float), n_resamples, seed=seed)
            rows.append([run_id, *key, ci.n, ci.mean, ci.low, ci.high])
    return pd.DataFrame(rows, columns=POINT_MEAN_COLUMNS)


def reference_differences(
    observed: Mapping[str, pd.DataFrame],
    binary: Mapping[str, bool],
    n_resamples: int,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Every later point against the first (the reference) on the questions both scored
    (`run_comparison.COMPARISON_COLUMNS`: first_run the reference), Holm over the whole table.
    Raises ValueError naming the measure when a point asked other questions.
    """
    (reference, first), *others = observed.items()
    rows = [
        comparison_rows(first, obs, binary, (reference, run_id), n_resamples=n_resamples, seed=seed)
        for run_id, obs in others
    ]
    return with_claims(pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(), alpha)


def best_points(
    observed: Mapping[str, pd.DataFrame],
    means: pd.DataFrame,
    binary: Mapping[str, bool],
    higher_is_better: Mapping[str, bool],
    n_resamples: int,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Per measure, method and partner held by two points or more: the best point by mean (the
    earlier in grid order on a tie), the runner-up, and the best against the runner-up on the questions
    both scored, Holm over the table; `distinguishable` is the claim rule's decision (`BEST_COLUMNS`).
    """
    found = []
    for key, group in means.groupby(KEY, sort=False):
        if len(group) < 2:
            continue
        ranked = group.assign(order=range(len(group))).sort_values(
            ["mean", "order"], ascending=[not higher_is_better[key[0]], True], kind="stable"
        )
        best, runner_up = ranked.iloc[0], ranked.iloc[1]
        row = comparison_rows(
            _of(observed[runner_up["run_id"]], key),
            _of(observed[best["run_id"]], key),
            binary,
            (runner_up["run_id"], best["run_id"]),
            n_resamples=n_resamples,
            seed=seed,
        )
        found.append(row.assign(points=len(group), best_mean=best["mean"], runner_up_mean=runner_up["mean"]))
    if not found:
        return pd.DataFrame(columns=BEST_COLUMNS)
    claimed = with_claims(pd.concat(found, ignore_index=True), alpha)
    extra = pd.concat(found, ignore_index=True)[["points", "best_mean", "runner_up_mean"]]
    table = pd.concat([claimed, extra], axis=1).rename(
        columns={"first_run": "runner_up_run", "second_run": "best_run", "supported": "distinguishable"}
    )
    return table[BEST_COLUMNS]


def heatmap_cells(
    means: pd.DataFrame,
    differences: pd.DataFrame,
    values: Mapping[str, Mapping[str, Any]],
    keys: tuple[str, str],
) -> pd.DataFrame:
    """Per measure, method and partner, one cell per pair of values of the two `keys` (`values`: run
    id -> the varied keys' values): the mean of the points' means there and of their differences to
    the reference (the reference's own is 0), over the points the cell holds (one when only these two
    keys vary; `HEATMAP_COLUMNS`).
    """
    x_key, y_key = keys
    reference = next(iter(values))
    to_reference = differences.rename(columns={"second_run": "run_id"})[["run_id", *KEY, "mean_diff"]]
    cells = means.merge(to_reference, on=["run_id", *KEY], how="left")
    cells.loc[cells["run_id"] == reference, "mean_diff"] = 0.0
    cells = cells.assign(
        x_key=x_key,
        y_key=y_key,
        x_value=[shown_value(values[r][x_key]) for r in cells["run_id"]],
        y_value=[shown_value(values[r][y_key]) for r in cells["run_id"]],
    )
    grouped = cells.groupby([*KEY, "x_key", "x_value", "y_key", "y_value"], sort=False)
    table = grouped.agg(
        points=("run_id", "size"), mean=("mean", "mean"), mean_diff=("mean_diff", "mean")
    ).reset_index()
    return table[HEATMAP_COLUMNS]


def seed_rows(
    published: pd.DataFrame,
    points: Mapping[str, Mapping[str, Any]],
    observed: Mapping[str, pd.DataFrame],
    binary: Mapping[str, bool],
    n_resamples: int,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """A published table of variations beside the sweep's matching points (`SEED_COLUMNS`): each
    published row (`variation`, `kit_point`: its settings as 'key=JSON; ...', `compared_with`: the
    variation it differs from, `kit_method`, `kit_measure`, `published` as a share) whose point and its
    base's point the sweep ran (`points`: run id -> every recorded dotted setting), with the published
    difference and the kit's paired one on the same questions (Holm over these rows) and whether both
    go the same way. Rows whose points the sweep did not run are left out.
    """
    by_variation = {(r.variation, r.kit_measure): r for r in published.itertuples(index=False)}
    found, meta = [], []
    for row in published.itertuples(index=False):
        base = by_variation.get((row.compared_with, row.kit_measure))
        if not row.compared_with or base is None:
            continue
        run, base_run = _point_of(row.kit_point, points), _point_of(base.kit_point, points)
        if run is None or base_run is None:
            continue
        wanted = (row.kit_measure, row.kit_method, "")
        compared = comparison_rows(
            _of(observed[base_run], wanted),
            _of(observed[run], wanted),
            binary,
            (base_run, run),
            n_resamples=n_resamples,
            seed=seed,
        )
        if compared.empty:
            continue
        found.append(compared)
        meta.append(
            {
                "variation": row.variation,
                "compared_with": row.compared_with,
                "kit_method": row.kit_method,
                "kit_measure": row.kit_measure,
                "published": row.published,
                "published_base": base.published,
                "published_difference": row.published - base.published,
                "published_dataset": row.published_dataset,
                "source": f"{row.paper}, {row.source}, {row.table}, row {row.row!r}",
            }
        )
    if not found:
        return pd.DataFrame(columns=SEED_COLUMNS)
    claimed = with_claims(pd.concat(found, ignore_index=True), alpha)
    table = pd.concat([pd.DataFrame(meta), claimed], axis=1).rename(
        columns={
            "second_run": "kit_run",
            "first_run": "kit_base_run",
            "second_mean": "kit_mean",
            "first_mean": "kit_base_mean",
            "mean_diff": "kit_difference",
        }
    )
    table["same_direction"] = np.sign(table["kit_difference"]) == np.sign(table["published_difference"])
    return table[SEED_COLUMNS]


def _of(observations: pd.DataFrame, key: tuple[str, ...]) -> pd.DataFrame:
    """The observations of one (measure, method, partner)."""
    return observations[(observations[KEY] == pd.Series(key, index=KEY)).all(axis=1)]


def parse_point(text: str) -> dict[str, Any]:
    """'retrieval.hops=2; retrieval.k=5' as {dotted key: value} (each value JSON)."""
    parts = [p.strip() for p in text.split(";") if p.strip()]
    return {key.strip(): json.loads(value) for key, value in (p.split("=", 1) for p in parts)}


def _point_of(kit_point: str, points: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The first point whose settings hold every value of `kit_point` (None when the sweep has none)."""
    wanted = parse_point(kit_point)
    return next(
        (run_id for run_id, s in points.items() if all(k in s and s[k] == v for k, v in wanted.items())),
        None,
    )


# Statements of notebook 15's `findings` table.
POINTS, COMPLETED, COMPARED, SUPPORTED, DISTINGUISHABLE, SEED_ROWS, SEED_SAME = (
    "points in the sweep",
    "points completed",
    "differences to the reference",
    "differences the claim rule supports",
    "best points distinguishable from the runner-up",
    "seed rows matched",
    "seed rows with the same direction",
)


def sweep_findings(
    points: int,
    completed: int,
    differences: pd.DataFrame,
    best: pd.DataFrame,
    seed: pd.DataFrame,
) -> list[Finding]:
    """The counts notebook 15's prose states."""
    return [
        Finding(POINTS, "grid points", float(points), "sweep_points"),
        Finding(COMPLETED, "completed grid points", float(completed), "sweep_points"),
        Finding(COMPARED, "rows", float(len(differences)), "reference_differences"),
        Finding(SUPPORTED, "rows", float(differences["supported"].sum()), "reference_differences"),
        Finding(DISTINGUISHABLE, "rows", float(best["distinguishable"].sum()), "best_points"),
        Finding(SEED_ROWS, "rows", float(len(seed)), "seed_comparison"),
        Finding(SEED_SAME, "rows", float(seed["same_direction"].sum()), "seed_comparison"),
    ]
