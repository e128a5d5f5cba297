"""Notebook 14's words: per pair (each later run against the first), the settings that differ, every
difference the claim rule supports and the ones it does not, the flipped questions and the cost
deltas; worded from its saved tables (`findings`: `evaluation.run_comparison.comparison_findings`).
"""

from __future__ import annotations

import pandas as pd

from ragtrial.evaluation.findings import FINDINGS_TABLE, stated
from ragtrial.evaluation.run_comparison import (
    COMPARED,
    FLIPPED,
    RIGHT_TO_WRONG,
    RUNS_FOUND,
    SUPPORTED,
    WRONG_TO_RIGHT,
    pair_name,
)
from ragtrial.report.markdown import escape_markdown
from ragtrial.report.narrative.narration import Narration, SavedTables, saved
from ragtrial.report.narrative.wording import plain_number

FLIPS_SHOWN = 10  # question ids listed per pair and direction; the table holds every one


def _signed(value: float) -> str:
    return f"{value:+.2f}"


def _difference_line(row: pd.Series) -> str:
    against = f" against {row['partner']}" if row["partner"] else ""
    interval = f"{_signed(row['mean_diff'])} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]"
    means = f"{row['first_mean']:.2f} → {row['second_mean']:.2f}"
    return (
        f"- **{escape_markdown(row['method'])}**{against}, {row['measure']} ({row['pairing']}, n = "
        f"{row['n']:.0f}): {means}, difference {interval}, {row['test']} p_holm = {row['p_holm']:.3g}: "
        f"{row['claim']}"
    )


def _pair_section(first: str, second: str, tables: SavedTables) -> list[str]:
    findings = saved(tables, FINDINGS_TABLE)
    pair = pair_name(first, second)
    differing = saved(tables, "settings_differences")
    differing = differing[(differing["first_run"] == first) & (differing["second_run"] == second)]
    keys = ", ".join(f"`{r.key}` (`{r.first_value}` → `{r.second_value}`)" for r in differing.itertuples())
    lines = [f"### `{second}` against `{first}`", f"Settings that differ: {keys or 'none'}."]
    comparisons = saved(tables, "run_comparisons")
    rows = comparisons[(comparisons["first_run"] == first) & (comparisons["second_run"] == second)]
    if rows.empty:
        return [*lines, "No measure both runs hold: nothing to pair."]
    compared, supported = (
        stated(findings, COMPARED, pair)["value"],
        stated(findings, SUPPORTED, pair)["value"],
    )
    rule = "the interval excludes zero and the Holm-adjusted test rejects"
    if supported:
        shown = "\n".join(_difference_line(row) for _, row in rows[rows["supported"].astype(bool)].iterrows())
        lines.append(
            f"Of {compared:.0f} differences (measure x method), {supported:.0f} are findings under the claim "
            f"rule ({rule}):\n{shown}"
        )
        if supported < compared:
            lines.append("The others say **no claim** (table `run_comparisons` holds every row).")
    else:
        lines.append(
            f"None of the {compared:.0f} differences (measure x method) is a finding under the claim rule "
            f"({rule}): every row says **no claim** (table `run_comparisons`)."
        )
    flips = saved(tables, "flipped_questions")
    flips = flips[(flips["first_run"] == first) & (flips["second_run"] == second)]
    for way in (RIGHT_TO_WRONG, WRONG_TO_RIGHT):
        count = stated(findings, FLIPPED, f"{pair}: {way}")["value"]
        ids = flips.loc[flips["flip"] == way, ["method", "measure", "question_id"]].head(FLIPS_SHOWN)
        shown = ", ".join(
            f"`{r.question_id}` ({escape_markdown(r.method)} {r.measure})" for r in ids.itertuples()
        )
        more = " and more (table `flipped_questions`)" if count > FLIPS_SHOWN else ""
        lines.append(f"Questions {way}: {count:.0f}" + (f": {shown}{more}." if shown else "."))
    costs = saved(tables, "cost_deltas")
    costs = costs[(costs["first_run"] == first) & (costs["second_run"] == second)]
    shown_costs = [
        f"{r.quantity} {plain_number(r.first)} → {plain_number(r.second)}"
        for r in costs.itertuples()
        if pd.notna(r.first) and pd.notna(r.second)
    ]
    if shown_costs:
        lines.append("Cost and latency (first → second run): " + "; ".join(shown_costs) + ".")
    return lines


def narrate(tables: SavedTables) -> Narration:
    """Per pair: settings, differences under the claim rule, flips, costs (tables `compared_runs`,
    `settings_differences`, `run_comparisons`, `flipped_questions`, `cost_deltas`, `findings`).
    """
    findings = saved(tables, FINDINGS_TABLE)
    runs = saved(tables, "compared_runs")
    found = stated(findings, RUNS_FOUND, "")["value"]
    if len(runs) < 2:
        text = (
            f"Fewer than two runs to compare ({found:.0f} found): name them in `compare.runs`, or run this "
            "notebook in a batch with several runs of `compare.notebook` (a grid)."
        )
        return Narration(text, text)
    first = str(runs.iloc[0]["run_id"])
    lines = [f"Each later run against the first, `{first}`, on the questions both asked."]
    for second in runs["run_id"].iloc[1:]:
        lines += _pair_section(first, str(second), tables)
    supported, compared = stated(findings, SUPPORTED, "")["value"], stated(findings, COMPARED, "")["value"]
    headline = (
        f"{len(runs) - 1:.0f} run(s) against {first}: {supported:.0f} of {compared:.0f} differences are "
        "findings under the claim rule"
    )
    return Narration(headline, "\n\n".join(lines))
