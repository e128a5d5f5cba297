"""Runs compared with each other (notebook 14, `ragtrial compare`): each later run against the first,
read from the runs' folders: what each used (data set, model, prompt versions, index), the settings
that differ (dotted keys of `run.json`'s settings), every measure both hold
(`evaluation.verdict_measures`) paired on the questions both asked (`evaluation.run_comparison`), the
questions that flipped, and the cost and latency deltas of their ledgers (`run.json`'s summary and
`ledger.csv`).

Runs that asked different questions are not paired: a differing `data.*` or `questions.*` setting, or a
measure whose question sets differ, is a ParamsError naming it, unless the comparison is unpaired.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from ragtrial.config.base import ParamsError
from ragtrial.config.compare import CompareSettings
from ragtrial.evaluation.run_comparison import (
    COMPARISON_COLUMNS,
    FLIP_COLUMNS,
    comparison_rows,
    flipped_questions,
    question_difference_text,
    with_claims,
)
from ragtrial.evaluation.verdict_measures import MEASURES, OBSERVATION_COLUMNS, MissingTable, observations
from ragtrial.llm.ledger import read_ledger
from ragtrial.report.files import read_saved_table
from ragtrial.report.index_page import RunRecord, data_set_label, matching_run, read_run_record
from ragtrial.runner.combined_runs import batch_runs_of, identity, settings_difference
from ragtrial.runner.execute import LEDGER_FILE
from ragtrial.stats import latency_summary

RUN_COLUMNS = [
    "position",
    "run_id",
    "notebook",
    "label",
    "status",
    "ended_at",
    "git_commit",
    "data",
    "model",
    "served_models",
    "prompts",
    "index",
    "measures",
]
DIFFERENCE_COLUMNS = ["first_run", "second_run", "key", "first_value", "second_value"]
COST_COLUMNS = ["first_run", "second_run", "quantity", "first", "second", "difference", "note"]
# The settings that decide which questions a run asks: runs differing in one are not paired.
QUESTION_KEYS = ("data.", "questions.")
# The ledger totals `run.json` records (`llm.ledger.summarize`) compared, and the run's wall time.
LEDGER_QUANTITIES = (
    "llm_calls_live",
    "llm_calls_cached",
    "prompt_tokens",
    "completion_tokens",
    "embedding_calls",
    "failures",
    "model_seconds",
)
UNPAIRED_HINT = "compare them as independent samples with --unpaired (compare.unpaired: true)"


@dataclass(frozen=True)
class RunComparison:
    """The tables of a comparison, by the names notebook 14 saves them under."""

    runs: pd.DataFrame  # RUN_COLUMNS
    settings: pd.DataFrame  # DIFFERENCE_COLUMNS
    comparisons: pd.DataFrame  # evaluation.run_comparison.COMPARISON_COLUMNS
    flips: pd.DataFrame  # evaluation.run_comparison.FLIP_COLUMNS
    costs: pd.DataFrame  # COST_COLUMNS

    def tables(self) -> dict[str, pd.DataFrame]:
        return {
            "compared_runs": self.runs,
            "settings_differences": self.settings,
            "run_comparisons": self.comparisons,
            "flipped_questions": self.flips,
            "cost_deltas": self.costs,
        }


Folders = Path | Sequence[Path]


def _folders(outputs: Folders) -> list[Path]:
    return [Path(outputs)] if isinstance(outputs, str | Path) else [Path(f) for f in outputs]


def find_run(outputs: Folders, target: str) -> Path:
    """The run folder `target` names: a path to a run folder (it holds a `/`), else a run id or unique
    prefix of one in the outputs folders; a ParamsError names a target that matches no run, several in
    one folder (`report.index_page.matching_run`) or one in each of several folders.
    """
    if "/" in target:
        path = Path(target)
        if not (path / "run.json").is_file():
            raise ParamsError(f"{target}: not a run folder (no run.json in it)")
        return path
    folders = _folders(outputs)
    if len(folders) == 1:
        return folders[0] / matching_run(folders[0], target)
    found = []
    for folder in folders:
        if not any(p.parent.name.startswith(target) for p in folder.glob("*/run.json")):
            continue
        found.append(folder / matching_run(folder, target))  # several matches there: refused, named
    if len(found) == 1:
        return found[0]
    where = ", ".join(str(f) for f in (found or folders))
    problem = "runs in several outputs folders match it" if found else "no run id starts with it in"
    raise ParamsError(f"{target}: {problem} {where}; give more of the run id, or the path of its run folder")


def read_runs(outputs: Folders, targets: list[str]) -> list[RunRecord]:
    """The completed runs `targets` name (run ids or unique prefixes in the outputs folders, or paths
    to run folders: `find_run`), in that order; a ParamsError names a target that matches no run or
    several, a run named twice, a record that cannot be read or a run that did not complete.
    """
    if len(targets) < 2:
        raise ParamsError(
            f"compare: give at least two runs, got {len(targets)} ({', '.join(targets) or 'none'})"
        )
    runs: list[RunRecord] = []
    for target in targets:
        run = completed_run(outputs, target)
        if any(seen.run_dir.resolve() == run.run_dir.resolve() for seen in runs):
            raise ParamsError(f"{target}: run {run.run_dir.name} is named twice")
        runs.append(run)
    return runs


def completed_run(outputs: Folders, target: str) -> RunRecord:
    """The completed run `target` names (`find_run`); a ParamsError names a record that cannot be
    read or a run that did not complete.
    """
    run = read_run_record(find_run(outputs, target))
    if run.record is None:
        raise ParamsError(f"run {run.run_dir.name}: {run.problem}")
    if run.record.get("status") != "completed":
        raise ParamsError(
            f"run {run.run_dir.name}: status {run.record.get('status', 'unknown')}, not completed"
        )
    return run


def run_names(runs: list[RunRecord]) -> list[str]:
    """What the tables call each run: its id, or `<outputs folder>/<id>` when runs of two folders share
    an id (the same settings run in two places).
    """
    ids = [run.run_dir.name for run in runs]
    return [
        f"{run.run_dir.parent.name}/{run.run_dir.name}"
        if ids.count(run.run_dir.name) > 1
        else run.run_dir.name
        for run in runs
    ]


def run_observations(run: RunRecord) -> pd.DataFrame:
    """Every measure the run holds (`verdict_measures.MEASURES` of its notebook whose tables it saved),
    as one frame of observations.
    """
    notebook = run.readable_record.get("notebook", "")
    frames = []
    for measure in MEASURES:
        if MEASURES.entry(measure).metadata["notebook"] != notebook:
            continue
        try:
            frames.append(observations(measure, partial(read_saved_table, run.run_dir)))
        except MissingTable:
            continue
    found = [f for f in frames if not f.empty]
    return (
        pd.concat(found, ignore_index=True)
        if found
        else pd.DataFrame(columns=["measure", *OBSERVATION_COLUMNS])
    )


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def run_row(position: int, run: RunRecord, measures: list[str], name: str = "") -> dict[str, Any]:
    """What the run is and used (`RUN_COLUMNS`), named `name` (default: its id)."""
    record = run.readable_record
    settings = record.get("settings", {})
    llm = settings.get("llm", {})
    index = identity(settings)["index"]
    return {
        "position": position,
        "run_id": name or run.run_dir.name,
        "notebook": record.get("notebook", ""),
        "label": record.get("label", ""),
        "status": record.get("status", ""),
        "ended_at": record.get("ended_at", ""),
        "git_commit": record.get("git_commit", ""),
        "data": data_set_label(settings),
        "model": f"{llm.get('model', '')} ({llm.get('backend', '')})",
        "served_models": ", ".join(record.get("served_models", [])),
        "prompts": ", ".join(record.get("prompts", [])),
        "index": ", ".join(f"{k}={_shown(v)}" for k, v in index.items()),
        "measures": ", ".join(measures),
    }


def settings_rows(first: RunRecord, second: RunRecord, names: tuple[str, str]) -> list[dict[str, Any]]:
    """The dotted settings keys whose values differ between the runs, named `names`
    (`DIFFERENCE_COLUMNS`).
    """
    differing = settings_difference(
        first.readable_record.get("settings", {}), second.readable_record.get("settings", {})
    )
    named = {"first_run": names[0], "second_run": names[1]}
    return [
        named | {"key": key, "first_value": _shown(a), "second_value": _shown(b)}
        for key, (a, b) in differing.items()
    ]


def question_settings(differences: list[dict[str, Any]]) -> str:
    """The differing settings that decide the questions, as 'key first vs second' ("" when none)."""
    return "; ".join(
        f"{d['key']} {d['first_value']} vs {d['second_value']}"
        for d in differences
        if d["key"].startswith(QUESTION_KEYS)
    )


def run_costs(run: RunRecord) -> dict[str, float]:
    """The run's ledger totals (`LEDGER_QUANTITIES`), its wall time and the latency of its live model
    calls (mean and p95 in seconds; absent when every call came from the cache).
    """
    record = run.readable_record
    ledger = record.get("ledger") or {}
    found = {q: float(ledger[q]) for q in LEDGER_QUANTITIES if q in ledger}
    if isinstance(record.get("duration_s"), int | float):
        found["duration_s"] = float(record["duration_s"])
    calls = read_ledger(run.run_dir / LEDGER_FILE) if (run.run_dir / LEDGER_FILE).is_file() else None
    if calls is not None and not calls.empty:
        live = calls[(calls["kind"] != "embedding") & ~calls["cached"].astype(bool)]
        if len(live):
            latency = latency_summary(live["latency_s"].astype(float))
            found |= {"latency_mean_s": float(latency["mean"]), "latency_p95_s": float(latency["p95"])}
    return found


def cost_rows(first: RunRecord, second: RunRecord, names: tuple[str, str]) -> list[dict[str, Any]]:
    """The second run's costs against the first's, named `names` (`COST_COLUMNS`); a quantity only one
    run has is a row with the other's value empty and a note saying why.
    """
    ours, theirs = run_costs(first), run_costs(second)
    rows = []
    for quantity in dict.fromkeys([*ours, *theirs]):
        a, b = ours.get(quantity, math.nan), theirs.get(quantity, math.nan)
        missing = [name for name, v in (("the first run", a), ("the second run", b)) if math.isnan(v)]
        note = (
            f"not recorded by {' and '.join(missing)} (no live call, or an older run.json)" if missing else ""
        )
        rows.append(
            {"first_run": names[0], "second_run": names[1], "quantity": quantity}
            | {"first": a, "second": b, "difference": b - a, "note": note}
        )
    return rows


def compare_runs(
    outputs: Folders,
    targets: list[str],
    *,
    unpaired: bool = False,
    n_resamples: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> RunComparison:
    """Each later run of `targets` against the first (`read_runs`): the runs, their differing
    settings, every measure both hold (Holm over the whole table), the flipped questions and the cost
    deltas. Unless `unpaired`, runs that asked different questions are a ParamsError naming the setting
    or the measure (with its question counts).
    """
    runs = read_runs(outputs, targets)
    observed = [run_observations(run) for run in runs]
    binary = {m: bool(MEASURES.entry(m).metadata["binary"]) for m in MEASURES}
    first, first_obs = runs[0], observed[0]
    named = run_names(runs)
    rows = [
        run_row(i + 1, run, sorted(set(obs["measure"])), name)
        for i, (run, obs, name) in enumerate(zip(runs, observed, named, strict=True))
    ]
    differences, compared, flips, costs = [], [], [], []
    for run, obs, name in zip(runs[1:], observed[1:], named[1:], strict=True):
        names = (named[0], name)
        differing = settings_rows(first, run, names)
        differences += differing
        why = (
            ""
            if unpaired
            else question_settings(differing) or question_difference_text(first_obs, obs, names)
        )
        if why:
            raise ParamsError(
                f"runs {names[0]} and {names[1]} asked different questions ({why}); {UNPAIRED_HINT}"
            )
        compared.append(
            comparison_rows(
                first_obs, obs, binary, names, paired=not unpaired, n_resamples=n_resamples, seed=seed
            )
        )
        if not unpaired:  # a question id of one run need not be the same question in the other
            flips.append(flipped_questions(first_obs, obs, binary, names))
        costs += cost_rows(first, run, names)
    return RunComparison(
        runs=pd.DataFrame(rows, columns=RUN_COLUMNS),
        settings=pd.DataFrame(differences, columns=DIFFERENCE_COLUMNS),
        comparisons=with_claims(pd.concat(compared, ignore_index=True), alpha),
        flips=pd.concat(flips, ignore_index=True) if flips else pd.DataFrame(columns=FLIP_COLUMNS),
        costs=pd.DataFrame(costs, columns=COST_COLUMNS),
    )


def runs_to_compare(outputs: Path, settings: CompareSettings, own_run_dir: Path | None) -> list[str]:
    """The runs notebook 14 compares: those `compare.runs` names, else the completed runs of
    `compare.notebook` in its own batch (a grid's points), in batch order.
    """
    return list(settings.runs) or batch_runs_of(outputs, own_run_dir, settings.notebook)


def no_comparison() -> RunComparison:
    """The tables of a comparison with fewer than two runs: empty, with their columns."""
    return RunComparison(
        runs=pd.DataFrame(columns=RUN_COLUMNS),
        settings=pd.DataFrame(columns=DIFFERENCE_COLUMNS),
        comparisons=pd.DataFrame(columns=COMPARISON_COLUMNS),
        flips=pd.DataFrame(columns=FLIP_COLUMNS),
        costs=pd.DataFrame(columns=COST_COLUMNS),
    )
