"""`ragtrial compare RUN_A RUN_B [RUN_C ...] [--outputs DIR ...] [--unpaired]`: each later run against the
first (run ids or unique prefixes in the outputs folders, or paths to run folders), on the questions
both asked: the runs, the
settings that differ, the paired difference of every measure both hold, the flipped questions and the
cost and latency deltas, printed from the tables notebook 14 saved in its run folder (its CSVs and
report.html are there). Runs that asked different questions are refused in one line naming the
setting or the measure, before any notebook runs, unless `--unpaired`.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

NOTEBOOK = "14_compare_runs"
FLIPS_SHOWN = 10  # question ids printed per pair and direction; the table holds every one


def add_parser(sub) -> None:
    comparing = sub.add_parser(
        "compare",
        help="each later run against the first on the same questions: the settings that differ, paired "
        "differences with intervals and Holm-adjusted tests, flipped questions, cost, latency (notebook 14)",
    )
    comparing.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run ids or unique prefixes of them, or paths to run folders; the first is the reference",
    )
    comparing.add_argument(
        "--outputs",
        action="append",
        help="an outputs folder holding runs; repeat it to read runs of several (the comparison is written "
        "in the first; default: <project>/outputs)",
    )
    comparing.add_argument(
        "--unpaired",
        action="store_true",
        help="compare runs that asked different questions as independent samples (Fisher's exact test, "
        "Mann-Whitney U) instead of refusing them",
    )
    comparing.set_defaults(handler=compare_command)


def _cell(value: object, digits: int = 3) -> str:
    from ragtrial.report.narrative.wording import plain_number

    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return plain_number(value, digits)
    return "" if value is None or value is pd.NA else str(value)


def _print_table(title: str, frame: pd.DataFrame, columns: list[str], right: set[int]) -> None:
    from ragtrial.runner.progress import text_table

    print(f"\n{title}")
    if frame.empty:
        print("  (none)")
        return
    rows = [[_cell(row[c]) for c in columns] for _, row in frame.iterrows()]
    for line in text_table(columns, rows, right):
        print(f"  {line}")


def print_comparison(tables: dict[str, pd.DataFrame]) -> None:
    """The comparison's saved tables, as the terminal shows them."""
    runs = tables["compared_runs"]
    _print_table(
        "Runs (1: the reference)", runs, ["position", "run_id", "label", "data", "model", "prompts"], {0}
    )
    _print_table(
        "Settings that differ",
        tables["settings_differences"],
        ["second_run", "key", "first_value", "second_value"],
        set(),
    )
    comparisons = tables["run_comparisons"].assign(
        interval=lambda t: [
            f"[{lo:+.3f}, {hi:+.3f}]" for lo, hi in zip(t["ci_low"], t["ci_high"], strict=True)
        ],
        difference=lambda t: [f"{d:+.3f}" for d in t["mean_diff"]],
        claim=lambda t: ["supported" if s else "no claim" for s in t["supported"]],
    )
    _print_table(
        "Every measure both runs hold (second run minus first; Holm over the whole table)",
        comparisons,
        [
            "second_run",
            "measure",
            "method",
            "partner",
            "n",
            "first_mean",
            "second_mean",
            "difference",
            "interval",
        ]
        + ["test", "p_holm", "claim"],
        {4, 5, 6, 7, 10},
    )
    flips = tables["flipped_questions"]
    print("\nFlipped questions")
    if flips.empty:
        print("  (none)")
    for (second, measure, method, way), group in flips.groupby(
        ["second_run", "measure", "method", "flip"], sort=False
    ):
        ids = ", ".join(group["question_id"].head(FLIPS_SHOWN)) + (
            ", ..." if len(group) > FLIPS_SHOWN else ""
        )
        print(f"  {second} {method} {measure} {way}: {len(group)} ({ids})")
    _print_table(
        "Cost and latency (run.json ledger, ledger.csv)",
        tables["cost_deltas"],
        ["second_run", "quantity", "first", "second", "difference", "note"],
        {2, 3, 4},
    )


def compare_command(args: argparse.Namespace) -> int:
    """Refuse what cannot be paired (exit 2), run notebook 14 on the runs, print its tables (exit 1 when
    the notebook failed, naming its error).
    """
    from ragtrial.config.batch import RunSpec
    from ragtrial.config.paths import outputs_dir, project_root
    from ragtrial.config.settings import validate_settings
    from ragtrial.report.files import read_saved_tables
    from ragtrial.report.index_page import render_index
    from ragtrial.runner.compared_runs import compare_runs, read_runs
    from ragtrial.runner.execute import execute_run

    root = project_root()
    folders = [outputs_dir(root, folder) for folder in args.outputs or [None]]
    outputs = folders[0]  # the comparison's own run folder goes there
    # a run of the first folder by its id (as a batch names it), any other by its folder's path
    run_ids = [
        run.run_dir.name if run.run_dir.parent.resolve() == outputs.resolve() else str(run.run_dir.resolve())
        for run in read_runs(folders, args.runs)
    ]
    settings = validate_settings(
        {"compare": {"runs": run_ids, "unpaired": args.unpaired}}, "ragtrial compare"
    )
    # the refusal in one line before a kernel starts; the notebook computes the same again
    compare_runs(outputs, run_ids, unpaired=args.unpaired, n_resamples=settings.compare.bootstrap_resamples)
    label = "compare " + " vs ".join(Path(run_id).name for run_id in run_ids)
    spec = RunSpec(notebook=NOTEBOOK, settings=settings, label=label)
    result = execute_run(spec, root, outputs, force=True)
    render_index(outputs)
    if result.status != "completed":
        reason = result.error.splitlines()[0] if result.error else ""
        print(
            f"error: {NOTEBOOK} {result.status}: {reason} ({Path(result.run_dir) / 'error.txt'})",
            file=sys.stderr,
        )
        return 1
    print_comparison(read_saved_tables(result.run_dir))
    print(
        f"\nreport: {Path(result.run_dir) / 'report.html'}\ntables: {Path(result.run_dir) / 'tables'} (CSV)"
    )
    return 0
