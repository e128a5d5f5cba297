"""Notebook 15's words: the grid's points and its reference, every difference to the reference the
claim rule supports, the best point per measure and method against its runner-up, each point's cost,
and the seed's published variations beside the kit's matching points; worded from its saved tables
(`findings`: `evaluation.sweep.sweep_findings`).
"""

from __future__ import annotations

import pandas as pd

from ragtrial.evaluation.findings import FINDINGS_TABLE, stated_count
from ragtrial.evaluation.sweep import (
    COMPARED,
    COMPLETED,
    DISTINGUISHABLE,
    POINT_COLUMNS,
    POINTS,
    SEED_ROWS,
    SEED_SAME,
    SUPPORTED,
)
from ragtrial.report.markdown import escape_markdown
from ragtrial.report.narrative.narration import Narration, SavedTables, saved
from ragtrial.report.narrative.wording import plain_number

RULE = "the paired interval excludes zero and the Holm-adjusted test rejects"
COST_QUANTITIES = ("llm_calls_live", "llm_calls_cached", "prompt_tokens", "completion_tokens")


def _point(points: pd.DataFrame, run_id: str, keys: list[str]) -> str:
    row = points[points["run_id"] == run_id].iloc[0]
    return f"`{run_id}` (" + ", ".join(f"`{key}={row[key]}`" for key in keys) + ")"


def _difference(row: pd.Series) -> str:
    return f"{row['mean_diff']:+.2f} [{row['ci_low']:+.2f}, {row['ci_high']:+.2f}]"


def _best_lines(best: pd.DataFrame, points: pd.DataFrame, keys: list[str]) -> list[str]:
    lines = []
    for _, row in best.iterrows():
        against = f" against {row['partner']}" if row["partner"] else ""
        verdict = (
            "distinguishable from the runner-up"
            if row["distinguishable"]
            else "not distinguishable from the runner-up (no claim)"
        )
        lines.append(
            f"- **{escape_markdown(row['method'])}**{against}, {row['measure']}: best at "
            f"{_point(points, row['best_run'], keys)}, {row['best_mean']:.2f}; runner-up "
            f"{_point(points, row['runner_up_run'], keys)}, {row['runner_up_mean']:.2f}; difference on the "
            f"{row['n']:.0f} questions both scored {_difference(row)}, {row['test']} p_holm = "
            f"{row['p_holm']:.3g}: {verdict}."
        )
    return lines


def _seed_lines(seed: pd.DataFrame, points: pd.DataFrame) -> list[str]:
    runs = points.set_index("run_id")
    kit = runs.loc[seed["kit_run"].iloc[0]]
    lines = [
        f"The seed's published variations (`{seed['published_dataset'].iloc[0]}`) beside this "
        f"sweep's matching points. **The kit's numbers are this batch's, on {kit['data']} with "
        f"{kit['model']}, not the seed's run**: they check the direction of each change and the "
        "protocol (paired, on the same questions, under the claim rule), and reproduce none of the "
        "seed's figures (table `seed_comparison`, the seed's rows with their source in "
        "`evaluation/published/seed001_variations.csv`)."
    ]
    for _, row in seed.iterrows():
        direction = (
            "no change in the kit"
            if row["kit_difference"] == 0
            else "the kit's estimate goes the same way"
            if row["same_direction"]
            else "the kit's estimate goes the other way"
        )
        claim = "supported" if row["supported"] else "no claim"
        lines.append(
            f"- {escape_markdown(row['variation'])} against {escape_markdown(row['compared_with'])}, "
            f"{row['kit_measure']} of {escape_markdown(row['kit_method'])}: seed "
            f"{row['published_base']:.0%} → {row['published']:.0%}; kit {row['kit_base_mean']:.2f} → "
            f"{row['kit_mean']:.2f}, "
            f"{row['kit_difference']:+.2f} [{row['ci_low']:+.2f}, {row['ci_high']:+.2f}] on {row['n']:.0f} "
            f"questions ({claim}): {direction}."
        )
    return lines


def _cost_line(costs: pd.DataFrame) -> str:
    shown = [q for q in COST_QUANTITIES if q in costs.columns]
    if not shown:
        return "No point's run.json records a ledger (table `point_costs`)."
    per_point = "; ".join(
        f"`{row['run_id']}` " + ", ".join(f"{q} {plain_number(row[q])}" for q in shown if pd.notna(row[q]))
        for _, row in costs.iterrows()
    )
    return f"Cost per point (its ledger, table `point_costs`): {per_point}."


def narrate(tables: SavedTables) -> Narration:
    """The points, the differences to the reference under the claim rule, the best points, the costs
    and the seed's rows (tables `sweep_points`, `reference_differences`, `best_points`, `point_costs`,
    `seed_comparison`, `findings`).
    """
    findings = saved(tables, FINDINGS_TABLE)
    points = saved(tables, "sweep_points")
    total, completed = stated_count(findings, POINTS), stated_count(findings, COMPLETED)
    if completed < 2:
        text = (
            f"Fewer than two completed points to read ({completed} of {total}): a sweep needs the grid's "
            "points run first (table `sweep_points` lists each with its status)."
        )
        return Narration(text, text)
    keys = [c for c in points.columns if c not in POINT_COLUMNS]
    reference = points.loc[points["reference"].astype(bool), "run_id"].iloc[0]
    left_out = points[points["status"] != "completed"]
    lines = [
        f"{completed} of {total} points completed, over "
        + ", ".join(f"`{k}`" for k in keys)
        + ". Every point "
        f"is compared with the reference {_point(points, reference, keys)} on the questions both scored."
    ]
    if len(left_out):
        lines.append(
            "Left out (not completed): "
            + ", ".join(f"`{r.run_id}` ({r.status})" for r in left_out.itertuples())
            + "."
        )
    compared, supported = stated_count(findings, COMPARED), stated_count(findings, SUPPORTED)
    differences = saved(tables, "reference_differences")
    found = differences[differences["supported"].astype(bool)]
    lines.append(
        f"Of {compared} differences to the reference (point x measure x method), {supported} are findings "
        f"under the claim rule ({RULE})"
        + (":" if supported else "; every other row says **no claim** (table `reference_differences`).")
    )
    lines += [
        f"- {_point(points, r['second_run'], keys)}, **{escape_markdown(r['method'])}** {r['measure']}: "
        f"{r['first_mean']:.2f} → {r['second_mean']:.2f}, {_difference(r)}, p_holm = {r['p_holm']:.3g}."
        for _, r in found.iterrows()
    ]
    best = saved(tables, "best_points")
    distinguishable = stated_count(findings, DISTINGUISHABLE)
    lines.append(
        f"The best point per measure and method, against the runner-up on the same questions (Holm over "
        f"the {len(best)} rows): {distinguishable} distinguishable under the claim rule."
    )
    lines += _best_lines(best, points, keys)
    lines.append(_cost_line(saved(tables, "point_costs")))
    seed = saved(tables, "seed_comparison")
    if stated_count(findings, SEED_ROWS):
        same = stated_count(findings, SEED_SAME)
        lines += _seed_lines(seed, points)
        lines.append(f"{same} of {len(seed)} of the seed's changes go the same way in the kit's estimates.")
    headline = (
        f"Sweep of {completed} points: {supported} of {compared} differences to the reference are findings; "
        f"{distinguishable} of {len(best)} best points are distinguishable from the runner-up"
    )
    return Narration(headline, "\n\n".join(lines))
