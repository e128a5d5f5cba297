"""A grid's points read as one report (notebook 15, the sweep): the points' runs read from their folders
(the runs `sweep.runs` names, which a batch's grid entry fills, else the batch's runs of
`sweep.notebook`), each point's values of the varied keys, its measures (`evaluation.verdict_measures`)
and its ledger totals (`runner.compared_runs.run_costs`); the tables computed by `evaluation.sweep`.

Points that asked different questions are not compared: a differing `data.*` or `questions.*` setting,
or a measure whose question sets differ, is a ParamsError naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ragtrial.config.base import ParamsError
from ragtrial.config.sweep import SweepSettings
from ragtrial.evaluation.published_figures import read_published
from ragtrial.evaluation.run_comparison import COMPARISON_COLUMNS, question_difference_text
from ragtrial.evaluation.sweep import (
    BEST_COLUMNS,
    HEATMAP_COLUMNS,
    POINT_COLUMNS,
    POINT_MEAN_COLUMNS,
    SEED_COLUMNS,
    best_points,
    heatmap_cells,
    point_means,
    reference_differences,
    seed_rows,
    shown_value,
)
from ragtrial.evaluation.verdict_measures import MEASURES
from ragtrial.report.index_page import RunRecord, data_set_label, read_run_record
from ragtrial.runner.combined_runs import ABSENT, batch_runs_of, flat_settings, settings_difference
from ragtrial.runner.compared_runs import (
    find_run,
    question_settings,
    run_costs,
    run_observations,
    settings_rows,
)

# the published variations the sweep sets beside its matching points (evaluation/published/)
SEED_FILE = "seed001_variations.csv"
NOT_RUN = "not run"


@dataclass(frozen=True)
class Sweep:
    """The tables of a sweep report, by the names notebook 15 saves them under, and its keys."""

    keys: list[str]  # the varied settings, in grid order
    heatmap_keys: tuple[str, str] | None
    points: pd.DataFrame  # POINT_COLUMNS, then one column per key (its value as JSON)
    means: pd.DataFrame  # evaluation.sweep.POINT_MEAN_COLUMNS
    differences: pd.DataFrame  # evaluation.run_comparison.COMPARISON_COLUMNS, first_run the reference
    best: pd.DataFrame  # evaluation.sweep.BEST_COLUMNS
    heatmap: pd.DataFrame  # evaluation.sweep.HEATMAP_COLUMNS
    costs: pd.DataFrame  # run_id, then the ledger quantities of runner.compared_runs.run_costs
    seed: pd.DataFrame  # evaluation.sweep.SEED_COLUMNS

    def tables(self) -> dict[str, pd.DataFrame]:
        return {
            "sweep_points": self.points,
            "point_means": self.means,
            "reference_differences": self.differences,
            "best_points": self.best,
            "sweep_heatmap": self.heatmap,
            "point_costs": self.costs,
            "seed_comparison": self.seed,
        }


def sweep_targets(outputs: Path, settings: SweepSettings, own_run_dir: Path | None) -> list[str]:
    """The points: `sweep.runs`, else the completed runs of `sweep.notebook` in the own batch."""
    return list(settings.runs) or batch_runs_of(outputs, own_run_dir, settings.notebook)


def varied_keys(settings: SweepSettings, recorded: list[dict[str, Any]]) -> list[str]:
    """`sweep.keys`, each checked to be a setting the points record, else every key whose value differs
    between the points (in the order the first difference names them).
    """
    if settings.keys:
        for key in settings.keys:
            if all(key not in flat_settings(r) for r in recorded):
                raise ParamsError(f"key 'sweep.keys': {key} is not a setting the points' run.json records")
        return list(settings.keys)
    found: dict[str, None] = {}
    for other in recorded[1:]:
        found |= dict.fromkeys(settings_difference(recorded[0], other))
    return list(found)


def heatmap_keys(settings: SweepSettings, keys: list[str]) -> tuple[str, str] | None:
    """The heatmap's two keys: `sweep.heatmap` (two varied keys), else the varied keys when there are
    exactly two, else none.
    """
    chosen = list(settings.heatmap)
    if chosen:
        if len(chosen) != 2 or len(set(chosen)) != 2:
            raise ParamsError(f"key 'sweep.heatmap': name two different varied keys, got {chosen}")
        for key in chosen:
            if key not in keys:
                varied = ", ".join(keys) or "none"
                raise ParamsError(f"key 'sweep.heatmap': {key} did not vary in the sweep (varied: {varied})")
        return chosen[0], chosen[1]
    return (keys[0], keys[1]) if len(keys) == 2 else None


def _point_row(position: int, run: RunRecord, keys: list[str]) -> dict[str, Any]:
    record = run.readable_record
    flat = flat_settings(record.get("settings", {}))
    llm = record.get("settings", {}).get("llm", {})
    return {
        "position": position,
        "run_id": run.run_dir.name,
        "label": record.get("label", ""),
        "status": record.get("status", "unknown"),
        "reference": False,  # set once the completed points are known
        "data": data_set_label(record.get("settings", {})),
        "model": f"{llm.get('model', '')} ({llm.get('backend', '')})",
    } | {key: shown_value(flat[key]) if key in flat else ABSENT for key in keys}


def _check_same_questions(first: RunRecord, run: RunRecord, ours: pd.DataFrame, theirs: pd.DataFrame) -> None:
    names = (first.run_dir.name, run.run_dir.name)
    why = question_settings(settings_rows(first, run, names)) or question_difference_text(ours, theirs, names)
    if why:
        raise ParamsError(
            f"sweep: points {names[0]} and {names[1]} asked different questions ({why}); a sweep pairs its "
            "points on the same questions"
        )


def read_sweep(outputs: Path, targets: list[str], settings: SweepSettings) -> Sweep:
    """The sweep over the points `targets` names (run ids, unique prefixes or run folders), the first
    completed one the reference; a point that did not complete is listed with its status (`not run`:
    no run folder matches it) and left out.
    """
    runs = []
    for target in targets:
        if "/" not in target and not any(
            p.parent.name.startswith(target) for p in outputs.glob("*/run.json")
        ):
            runs.append(RunRecord(outputs / target, {"status": NOT_RUN}))  # a point the batch did not reach
            continue
        run = read_run_record(find_run(outputs, target))
        if run.record is None:
            raise ParamsError(f"sweep: run {run.run_dir.name}: {run.problem}")
        runs.append(run)
    recorded = [run.readable_record["settings"] for run in runs if "settings" in run.readable_record]
    keys = varied_keys(settings, recorded) if recorded else list(settings.keys)
    chosen = heatmap_keys(settings, keys)
    completed = [run for run in runs if run.readable_record.get("status") == "completed"]
    points = pd.DataFrame(
        [_point_row(i + 1, run, keys) for i, run in enumerate(runs)], columns=[*POINT_COLUMNS, *keys]
    )
    points["reference"] = points["run_id"] == (completed[0].run_dir.name if completed else None)
    if len(completed) < 2:
        return _empty(keys, chosen, points)
    observed = {run.run_dir.name: run_observations(run) for run in completed}
    first = completed[0]
    for run in completed[1:]:
        _check_same_questions(first, run, observed[first.run_dir.name], observed[run.run_dir.name])
    values = {run.run_dir.name: flat_settings(run.readable_record.get("settings", {})) for run in completed}
    binary = {m: bool(MEASURES.entry(m).metadata["binary"]) for m in MEASURES}
    higher = {m: bool(MEASURES.entry(m).metadata["higher_is_better"]) for m in MEASURES}
    resamples, alpha = settings.bootstrap_resamples, settings.alpha
    means = point_means(observed, resamples)
    differences = reference_differences(observed, binary, resamples, alpha=alpha)
    return Sweep(
        keys=keys,
        heatmap_keys=chosen,
        points=points,
        means=means,
        differences=differences,
        best=best_points(observed, means, binary, higher, resamples, alpha=alpha),
        heatmap=(
            heatmap_cells(means, differences, values, chosen)
            if chosen
            else pd.DataFrame(columns=HEATMAP_COLUMNS)
        ),
        costs=pd.DataFrame([{"run_id": run.run_dir.name} | run_costs(run) for run in completed]),
        seed=seed_rows(read_published(SEED_FILE), values, observed, binary, resamples, alpha=alpha),
    )


def _empty(keys: list[str], chosen: tuple[str, str] | None, points: pd.DataFrame) -> Sweep:
    """The tables of a sweep with fewer than two completed points: empty, with their columns."""
    return Sweep(
        keys=keys,
        heatmap_keys=chosen,
        points=points,
        means=pd.DataFrame(columns=POINT_MEAN_COLUMNS),
        differences=pd.DataFrame(columns=COMPARISON_COLUMNS),
        best=pd.DataFrame(columns=BEST_COLUMNS),
        heatmap=pd.DataFrame(columns=HEATMAP_COLUMNS),
        costs=pd.DataFrame(columns=["run_id"]),
        seed=pd.DataFrame(columns=SEED_COLUMNS),
    )
