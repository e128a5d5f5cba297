"""Which runs the verdict (notebook 10) combines: the runs named in `verdict.runs`, else this batch's
runs of the input notebooks, else the latest completed run of each; never runs of another data set,
model or index.

A run's identity is what its result tables are measured on: the data set (its `data` settings), the
model (`llm.backend`, `llm.model`) and the index (the `index` settings but `store_path`, which says
where the index is kept, not what it is, and `embeddings.model` and `embeddings.precision`). Runs are
compared on the `settings` their `run.json` records.

A run that varies one setting of an earlier run of its batch (a grid's neighbouring point, a params
file's variation) is compared with it on the same questions (`batch_variations`,
`paired_with_variations`): the same method in both runs, for notebook 04's report.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ragtrial.config.base import ParamsError
from ragtrial.config.notebooks import real_evidence_notebooks
from ragtrial.config.settings import Settings, validate_settings
from ragtrial.evaluation.cross_run import paired_across_runs, question_set_difference
from ragtrial.evaluation.verdict import VerdictInputs
from ragtrial.report.files import read_saved_table, saved_table_path
from ragtrial.report.index_page import RunRecord, read_run_record, run_records
from ragtrial.runner.checks import run_folder
from ragtrial.runner.credentials import mask_credentials

RUN_COLUMNS = ["notebook", "run_id", "how", "status", "ended_at", "git_commit", "label", "point"]
MISSING_COLUMNS = ["notebook", "reason"]
SKIPPED_COLUMNS = ["run_id", "notebook", "reason"]
NAMED = "named in verdict.runs"
NAMED_POINT = "a grid point named in verdict.runs"
BATCH_POINT = "a grid point of this batch"
THIS_BATCH = "this batch"
LATEST = "latest matching"
# Shown for a settings key one of the two runs does not record (a run.json of an older kit).
ABSENT = "(absent)"


def identity(settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A run's identity from its recorded settings: per facet (data set, model, index), the dotted keys
    that make it and their values.
    """
    index = {k: v for k, v in settings.get("index", {}).items() if k != "store_path"}
    llm, embeddings = settings.get("llm", {}), settings.get("embeddings", {})
    return {
        "data set": flat_settings(settings.get("data", {}), "data."),
        "model": {"llm.backend": llm.get("backend", ABSENT), "llm.model": llm.get("model", ABSENT)},
        "index": {
            **flat_settings(index, "index."),
            "embeddings.model": embeddings.get("model", ABSENT),
            "embeddings.precision": embeddings.get("precision", ABSENT),
        },
    }


def flat_settings(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested settings as {dotted key (after `prefix`): value}."""
    flat: dict[str, Any] = {}
    for name, value in values.items():
        if isinstance(value, dict):
            flat.update(flat_settings(value, f"{prefix}{name}."))
        else:
            flat[prefix + name] = value
    return flat


def _shown(value: Any) -> str:
    return value if value == ABSENT else json.dumps(value)


def identity_difference(theirs: dict[str, Any], ours: dict[str, Any]) -> str:
    """How the run with settings `theirs` differs from the verdict's `ours` in data set, model or index
    ("" when it does not), e.g. 'data set: data.size "tiny" vs "small"'.
    """
    mine, other = identity(ours), identity(theirs)
    clauses = []
    for facet, keys in mine.items():
        names = list(dict.fromkeys([*keys, *other[facet]]))
        differing = [
            f"{key} {_shown(other[facet].get(key, ABSENT))} vs {_shown(keys.get(key, ABSENT))}"
            for key in names
            if other[facet].get(key, ABSENT) != keys.get(key, ABSENT)
        ]
        if differing:
            clauses.append(f"{facet}: {', '.join(differing)}")
    return " and ".join(clauses)


@dataclass
class CombinedRuns:
    """The runs the verdict combines (`runs`, one per notebook), the notebooks it has none for
    (`missing`, with why) and the runs of those notebooks it left out (`skipped`, with why).
    """

    runs: pd.DataFrame
    missing: pd.DataFrame
    skipped: pd.DataFrame
    chosen: dict[str, RunRecord]
    # a grid's points (point name -> run) of `grid_notebook`, in batch order; `chosen` holds the first
    points: dict[str, RunRecord] = field(default_factory=dict)
    grid_notebook: str = ""

    def inputs(self) -> VerdictInputs:
        """What the verdict reads of this combination: its tables, notebooks and validated settings."""
        return VerdictInputs(
            self.table, set(self.chosen), lambda nb: validate_settings(self.settings(nb), f"run {nb}")
        )

    def point_inputs(self) -> list[tuple[str, str, VerdictInputs]]:
        """Per grid point (none without a grid): its name, its run id and the combination with that
        point's run of the grid's notebook and the others' runs as they are.
        """
        return [
            (name, run.run_dir.name, replace(self, chosen={**self.chosen, self.grid_notebook: run}).inputs())
            for name, run in self.points.items()
        ]

    def _run(self, notebook: str) -> RunRecord:
        if notebook not in self.chosen:
            raise KeyError(
                f"no combined run of notebook {notebook} (combined: {', '.join(self.chosen) or 'none'})"
            )
        return self.chosen[notebook]

    def table(self, notebook: str, name: str) -> pd.DataFrame | None:
        """The result table `name` of the notebook's combined run; None when the notebook has none. A
        combined run without the table is an error naming the file.
        """
        if notebook not in self.chosen:
            return None
        path = saved_table_path(self.chosen[notebook].run_dir, name)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: run {path.parent.parent.name} saved no {name} table")
        return pd.read_parquet(path)

    def settings(self, notebook: str) -> dict[str, Any]:
        """The settings the notebook's combined run recorded in its run.json."""
        return self._run(notebook).readable_record["settings"]

    def run_dir(self, notebook: str) -> Path:
        """The folder of the notebook's combined run."""
        return self._run(notebook).run_dir

    def upstream_builds(self) -> dict[str, dict[str, Any]]:
        """Per upstream system, the index build a combined run recorded (run.json `systems`); the
        same build recorded by several runs is one build.
        """
        builds: dict[str, dict[str, Any]] = {}
        for run in self.chosen.values():
            for system, used in (run.readable_record.get("systems") or {}).items():
                if used.get("index"):
                    builds.setdefault(system, used["index"])
        return builds


def _ended(run: RunRecord) -> dt.datetime | None:
    """When the run ended (a time without a zone is UTC, as the runner writes them); None if unreadable."""
    try:
        ended = dt.datetime.fromisoformat(str(run.readable_record.get("ended_at", "")))
    except ValueError:
        return None
    return ended if ended.tzinfo else ended.replace(tzinfo=dt.UTC)


def _labelled(outputs: Path, label: str, batch: list[str], notebooks: list[str]) -> list[str]:
    """The runs of `notebooks` labelled `label` (a grid point's label, or a grid entry's own): this
    batch's, in batch order, else every run folder's under `outputs`, in folder order.
    """
    runs = {
        r.run_dir.name: r
        for r in run_records(outputs)
        if r.record and r.record.get("label") == label and r.record.get("notebook") in notebooks
    }
    in_batch = [run_id for run_id in batch if run_id in runs]
    return in_batch or list(runs)


@dataclass(frozen=True)
class NamedRuns:
    """What `verdict.runs` names: one run per notebook (`chosen`), and the points of a grid whose label it
    names (point label -> run, of `grid_notebook`; the first point is also in `chosen`).
    """

    chosen: list[RunRecord]
    points: dict[str, RunRecord]
    grid_notebook: str


def _named(
    outputs: Path, run_ids: list[str], notebooks: list[str], ours: dict[str, Any], batch: list[str]
) -> NamedRuns:
    """The runs `verdict.runs` names, by run id or by label (a grid point's, or a grid's: then each point
    in turn), each checked: there, completed, of a wanted notebook (once each, but a grid's points) and
    of this verdict's data set, model and index; every fault is named in one error.
    """
    faults: list[str] = []
    differing: list[str] = []
    chosen: list[RunRecord] = []
    by_notebook: dict[str, str] = {}
    grids: list[tuple[str, str, list[RunRecord]]] = []  # (label, notebook, its runs)
    for name in run_ids:
        try:
            run_dir = run_folder(outputs, name)
        except ParamsError as err:
            faults.append(str(err))
            continue
        found = [name] if run_dir.is_dir() else _labelled(outputs, name, batch, notebooks)
        if not found:
            faults.append(
                f"run {name}: no such run folder {run_dir}, and no run the verdict reads is labelled {name!r}"
            )
            continue
        checked: dict[str, list[RunRecord]] = {}
        for run_id in found:
            run_dir = outputs / run_id
            if not (run_dir / "run.json").is_file():
                faults.append(f"run {run_id}: no run.json in its folder {run_dir}")
                continue
            run = read_run_record(run_dir)
            if run.record is None:
                faults.append(f"run {run_id}: {run.problem}")
                continue
            status, notebook = run.record.get("status", "unknown"), run.record.get("notebook", "")
            if status != "completed":
                faults.append(f"run {run_id}: status {status}, not completed")
            elif notebook not in notebooks:
                faults.append(
                    f"run {run_id}: of notebook {notebook!r}, not one the verdict reads "
                    f"({', '.join(notebooks)})"
                )
            elif difference := identity_difference(run.record.get("settings", {}), ours):
                differing.append(f"run {run_id} differs from this verdict's {difference}")
            else:
                checked.setdefault(notebook, []).append(run)
        for notebook, runs in checked.items():
            if notebook in by_notebook:
                faults.append(
                    f"runs {by_notebook[notebook]} and {runs[0].run_dir.name} are both of notebook {notebook}"
                )
                continue
            by_notebook[notebook] = runs[0].run_dir.name
            chosen.append(runs[0])
            if len(runs) > 1:
                grids.append((name, notebook, runs))
    if len(grids) > 1:
        faults.append(
            f"labels {grids[0][0]!r} and {grids[1][0]!r} name two grids: the verdict reads one at a time"
        )
    if faults or differing:
        raise ParamsError("key 'verdict.runs': " + "; ".join(faults + differing))
    if not grids:
        return NamedRuns(chosen, {}, "")
    _, notebook, runs = grids[0]
    return NamedRuns(chosen, grid_points(runs), notebook)


def grid_points(runs: list[RunRecord]) -> dict[str, RunRecord]:
    """A grid's runs by point name: the settings each differs in from the first ('key=value, ...'; the
    first is named by its label, or its run id), in order.
    """
    first = runs[0].readable_record.get("settings", {})
    named = {}
    for run in runs:
        differing = settings_difference(first, run.readable_record.get("settings", {}))
        shown = ", ".join(f"{key}={json.dumps(value)}" for key, (_, value) in differing.items())
        named[shown or run.readable_record.get("label") or run.run_dir.name] = run
    return named


def _own_batch(own_run_dir: Path | None) -> list[str]:
    """The run ids of the batch the verdict's own run belongs to ([] outside a batch)."""
    if own_run_dir is None or not (Path(own_run_dir) / "run.json").is_file():
        return []
    own = read_run_record(Path(own_run_dir))
    if own.record is None:
        raise ParamsError(f"the verdict's own run record: {own.problem}")
    return list((own.record.get("batch") or {}).get("run_ids", []))


def batch_runs_of(outputs: Path, own_run_dir: Path | None, notebook: str) -> list[str]:
    """The completed runs of `notebook` in the batch the own run belongs to (a grid's points), in batch
    order ([] outside a batch).
    """
    found = []
    for run_id in _own_batch(own_run_dir):
        if not run_id.startswith(f"{notebook}-") or not (Path(outputs) / run_id / "run.json").is_file():
            continue
        record = read_run_record(run_folder(outputs, run_id)).record or {}
        if record.get("status") == "completed":
            found.append(run_id)
    return found


def combine_runs(
    outputs: Path, settings: Settings, notebooks: list[str], run_ids: list[str], own_run_dir: Path | None
) -> CombinedRuns:
    """The runs whose result tables the verdict combines: those `run_ids` names (`verdict.runs`; every
    fault is a ParamsError naming the run), else per notebook this batch's completed run of the same
    data set, model and index (the batch read from `own_run_dir`'s run.json), else the latest completed
    such run under `outputs` (by `ended_at`).
    """
    outputs = Path(outputs)
    ours = mask_credentials(settings.model_dump(mode="json"))[0]
    chosen: dict[str, tuple[RunRecord, str]] = {}
    skipped: list[tuple[str, str, str]] = []
    batch = _own_batch(own_run_dir)
    if run_ids:
        named = _named(outputs, run_ids, notebooks, ours, batch)
        chosen = {run.readable_record["notebook"]: (run, NAMED) for run in named.chosen}
        missing = [(nb, "no run of it named in verdict.runs") for nb in notebooks if nb not in chosen]
        return _combined(
            notebooks, chosen, missing, skipped, (named.grid_notebook, named.points, NAMED_POINT)
        )
    own = Path(own_run_dir).resolve() if own_run_dir is not None else None
    candidates: dict[str, list[RunRecord]] = {nb: [] for nb in notebooks}
    others: dict[str, int] = dict.fromkeys(notebooks, 0)  # completed runs of another identity
    for run in run_records(outputs):
        if run.run_dir.resolve() == own:
            continue
        if run.record is None:
            notebook = next((nb for nb in notebooks if run.run_dir.name.startswith(f"{nb}-")), None)
            if notebook is not None:
                skipped.append((run.run_dir.name, notebook, run.problem))
            continue
        notebook = run.record.get("notebook", "")
        if notebook not in candidates:
            continue
        status = run.record.get("status", "unknown")
        if status != "completed":
            skipped.append((run.run_dir.name, notebook, f"status {status}"))
        elif difference := identity_difference(run.record.get("settings", {}), ours):
            skipped.append((run.run_dir.name, notebook, f"differs from this verdict's {difference}"))
            others[notebook] += 1
        elif _ended(run) is None:
            skipped.append(
                (run.run_dir.name, notebook, f"{run.run_dir / 'run.json'}: ended_at is not an ISO 8601 time")
            )
        else:
            candidates[notebook].append(run)
    missing = []
    grid: tuple[str, dict[str, RunRecord], str] = ("", {}, BATCH_POINT)
    for notebook, runs in candidates.items():
        in_batch = sorted(
            (run for run in runs if run.run_dir.name in batch), key=lambda run: batch.index(run.run_dir.name)
        )
        if len(in_batch) > 1 and not grid[0]:  # a grid of this batch: its verdict per point
            grid = (notebook, grid_points(in_batch), BATCH_POINT)
            chosen[notebook] = (in_batch[0], BATCH_POINT)
            skipped += [
                (
                    run.run_dir.name,
                    notebook,
                    "not chosen: this batch's runs of it are a grid, read point by point",
                )
                for run in runs
                if run not in in_batch
            ]
            continue
        pool, how = (in_batch, THIS_BATCH) if in_batch else (runs, LATEST)
        if not pool:
            reason = (
                f"no run for this data set, model and index ({others[notebook]} runs of other ones)"
                if others[notebook]
                else "no completed run"
            )
            missing.append((notebook, reason))
            continue
        best = max(pool, key=lambda run: (_ended(run), run.run_dir.name))
        chosen[notebook] = (best, how)
        skipped += [
            (run.run_dir.name, notebook, f"not chosen: {best.run_dir.name} is ({how})")
            for run in runs
            if run is not best
        ]
    return _combined(notebooks, chosen, missing, skipped, grid)


def _run_row(notebook: str, run: RunRecord, how: str, point: str = "") -> list[str]:
    record = run.readable_record
    cells = [record.get(key, "") for key in ("status", "ended_at", "git_commit", "label")]
    return [notebook, run.run_dir.name, how, *cells, point]


def _combined(
    notebooks: list[str],
    chosen: dict[str, tuple[RunRecord, str]],
    missing: list[tuple[str, str]],
    skipped: list[tuple[str, str, str]],
    grid: tuple[str, dict[str, RunRecord], str] = ("", {}, ""),
) -> CombinedRuns:
    """The combination; `grid`: the notebook whose runs are a grid's points, its points by name (the
    first also in `chosen`) and how they were found: one row per point in the runs table.
    """
    grid_notebook, points, point_how = grid
    rows = []
    for notebook in (nb for nb in notebooks if nb in chosen):
        if notebook == grid_notebook:
            rows += [_run_row(notebook, run, point_how, name) for name, run in points.items()]
        else:
            rows.append(_run_row(notebook, *chosen[notebook]))
    return CombinedRuns(
        runs=pd.DataFrame(rows, columns=RUN_COLUMNS),
        missing=pd.DataFrame(missing, columns=MISSING_COLUMNS),
        skipped=pd.DataFrame(skipped, columns=SKIPPED_COLUMNS),
        chosen={notebook: chosen[notebook][0] for notebook in notebooks if notebook in chosen},
        points=points,
        grid_notebook=grid_notebook,
    )


BENCHMARK_TABLES = ("baselines", "comparisons", "graph_bills")


def batch_benchmark_runs(
    outputs: Path, own_run_dir: Path | None
) -> list[tuple[str, str, dict[str, pd.DataFrame]]]:
    """The completed notebook-13 runs of the verdict's own batch (whatever their data set: each is a
    verdict of its own), in batch order: run id, data set label, and the tables the verdict reads.
    """
    found = []
    for run_id in _own_batch(own_run_dir):
        run = read_run_record(run_folder(outputs, run_id))
        record = run.record or {}
        if record.get("notebook") not in real_evidence_notebooks() or record.get("status") != "completed":
            continue
        tables = {name: read_saved_table(run.run_dir, name) for name in BENCHMARK_TABLES}
        if any(t is None for t in tables.values()):
            continue
        data = record.get("settings", {}).get("data", {})
        found.append((run_id, f"{data.get('dataset', '')} ({data.get('path', '')})", tables))
    return found


VARIATION_COLUMNS = ["run_id", "label", "status", "varied", "reference_value", "value", "compared", "reason"]


@dataclass(frozen=True)
class Variation:
    """An earlier run of the same notebook in this run's batch that differs from it in one setting."""

    run_id: str
    label: str
    run_dir: Path
    setting: str  # the dotted key the two runs differ in
    reference_value: Any  # its value in the earlier run
    value: Any  # its value in this run


def settings_difference(theirs: dict[str, Any], ours: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The dotted settings keys whose values differ between two recorded settings, with (theirs, ours)."""
    a, b = flat_settings(theirs, ""), flat_settings(ours, "")
    return {
        key: (a.get(key, ABSENT), b.get(key, ABSENT))
        for key in dict.fromkeys([*a, *b])
        if a.get(key, ABSENT) != b.get(key, ABSENT)
    }


def batch_variations(outputs: Path, own_run_dir: Path) -> tuple[list[Variation], pd.DataFrame]:
    """The runs this run is compared with: the runs of its own notebook listed before it in its batch
    whose recorded settings differ from its own in exactly one key (a grid's neighbouring point, a
    params file's one-setting variation), completed. Each earlier run of the notebook is a row of the
    table, with why it was not compared (`VARIATION_COLUMNS`); outside a batch both are empty. Every
    pair of a batch is thus compared once, in the later run's report.
    """
    own = read_run_record(Path(own_run_dir))
    if own.record is None:
        return [], pd.DataFrame(columns=VARIATION_COLUMNS)
    batch = _own_batch(own_run_dir)
    own_id = Path(own_run_dir).name
    earlier = batch[: batch.index(own_id)] if own_id in batch else []
    notebook = own.record.get("notebook", "")
    found: list[Variation] = []
    rows = []
    for run_id in dict.fromkeys(
        r for r in earlier if r.startswith(f"{notebook}-")
    ):  # a run id: notebook-hash
        run = read_run_record(run_folder(Path(outputs), run_id))
        record = run.record or {}
        differing = settings_difference(record.get("settings", {}), own.record.get("settings", {}))
        row = {"run_id": run_id, "label": record.get("label", ""), "status": record.get("status", "")}
        row |= {"varied": ", ".join(differing), "reference_value": "", "value": "", "compared": False}
        if run.record is None:
            reason = run.problem
        elif len(differing) != 1:
            reason = f"differs in {len(differing)} settings, not one"
        elif record.get("status") != "completed":
            reason = f"status {record.get('status', 'unknown')}, not completed"
        else:
            ((key, (theirs, ours)),) = differing.items()
            found.append(Variation(run_id, row["label"], run.run_dir, key, theirs, ours))
            row |= {"reference_value": json.dumps(theirs), "value": json.dumps(ours), "compared": True}
            reason = ""
        rows.append(row | {"reason": reason})
    return found, pd.DataFrame(rows, columns=VARIATION_COLUMNS)


def paired_with_variations(
    variations: list[Variation],
    runs: pd.DataFrame,
    scores: pd.DataFrame,
    metrics: list[str],
    n_resamples: int,
    seed: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """This run's `scores` against each of `variations`' saved `scores` table
    (`evaluation.cross_run.paired_across_runs`, Holm across every row of a measure), each row naming
    the reference run and the setting that differs; and `runs` (`batch_variations`' table) with a
    reference that asked other questions marked not compared, with why.
    """
    runs = runs.copy()
    references: dict[str, pd.DataFrame] = {}
    for variation in variations:
        theirs = read_saved_table(variation.run_dir, "scores")
        why = "it saved no scores table" if theirs is None else question_set_difference(theirs, scores)
        if why:
            runs.loc[runs["run_id"] == variation.run_id, ["compared", "reason"]] = [False, why]
        else:
            references[variation.run_id] = theirs
    table = paired_across_runs(references, scores, metrics, n_resamples, seed)
    described = {v.run_id: v for v in variations}
    return (
        table.assign(
            reference_label=table["reference"].map(lambda r: described[r].label),
            setting=table["reference"].map(lambda r: described[r].setting),
            reference_value=table["reference"].map(lambda r: json.dumps(described[r].reference_value)),
            value=table["reference"].map(lambda r: json.dumps(described[r].value)),
        ),
        runs,
    )
