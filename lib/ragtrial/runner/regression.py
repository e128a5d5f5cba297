"""The regression mode of the retrieval diagnostics (`ragtrial diagnose`, seed 004: "run it every time
you change ingestion logic"): a metric of notebook 09's `diagnostics_summary` table regresses when it
falls below its threshold, falls below a stored baseline's value by more than a tolerance, or was
computed in the baseline and is unavailable now. A baseline is a JSON file holding a summary's rows
with the kit's git commit, run id and settings hash of the run that produced them.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ragtrial.config.base import ParamsError, conflict, params_error
from ragtrial.report.files import saved_table_path, write_json

DIAGNOSTICS_NOTEBOOK = "09_retrieval_diagnostics"
SUMMARY_TABLE = "diagnostics_summary"
KEY = ["method", "category", "metric"]
SUMMARY_COLUMNS = [*KEY, "n", "mean", "ci_low", "ci_high", "threshold", "below_threshold", "unavailable"]
REGRESSION_COLUMNS = [
    *KEY,
    "rules",
    "value",
    "n",
    "threshold",
    "below_threshold_by",
    "baseline",
    "below_baseline_by",
    "tolerance",
    "unavailable",
]
BASELINE_KIND = "ragtrial diagnostics baseline"
# A fall of exactly `tolerance` is within it; floating-point subtraction (0.80 - 0.75) must not push
# it over.
_ROUNDING = 1e-9


class BaselineRow(BaseModel):
    """One (method, category, metric) row of a stored diagnostics summary."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    method: str = Field(min_length=1, description="the method diagnosed")
    category: str = Field(min_length=1, description="the question category")
    metric: str = Field(min_length=1, description="the metric, e.g. entity_recall")
    n: int = Field(ge=0, description="questions with a value")
    mean: float | None = Field(description="the metric's mean; null when unavailable")
    ci_low: float | None = Field(description="lower end of the mean's confidence interval")
    ci_high: float | None = Field(description="upper end of the mean's confidence interval")
    threshold: float | None = Field(description="the metric's threshold; null when it has none")
    below_threshold: bool = Field(description="the mean is below the threshold")
    unavailable: str = Field(description='why the metric was not computed; "" when it was')

    @model_validator(mode="after")
    def _computed_rows_have_a_mean(self) -> BaselineRow:
        if not self.unavailable and self.mean is None:
            raise conflict("mean", 'null, but "unavailable" is empty: a computed metric has a mean')
        return self


class Baseline(BaseModel):
    """A stored diagnostics summary (`ragtrial diagnose --save-baseline`) and where it came from."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["ragtrial diagnostics baseline"] = Field(description="marks the file as a baseline")
    git_commit: str = Field(description="the kit's commit of the run that produced the rows")
    run_id: str = Field(description="the run that produced the rows")
    settings_hash: str = Field(description="that run's settings hash")
    saved_at: str = Field(description="when the baseline was saved (UTC, ISO 8601)")
    rows: list[BaselineRow] = Field(min_length=1, description="the summary's rows")

    @model_validator(mode="after")
    def _one_row_per_metric(self) -> Baseline:
        seen: dict[tuple[str, str, str], int] = {}
        for i, row in enumerate(self.rows):
            key = (row.method, row.category, row.metric)
            if key in seen:
                raise conflict("rows", f"rows {seen[key]} and {i} are both {' / '.join(key)}")
            seen[key] = i
        return self

    def frame(self) -> pd.DataFrame:
        """The rows as a summary table (NaN where the file holds null)."""
        return pd.DataFrame([row.model_dump() for row in self.rows], columns=SUMMARY_COLUMNS).astype(
            {c: float for c in ("mean", "ci_low", "ci_high", "threshold")}
        )


def _checked_summary(summary: pd.DataFrame, what: str) -> dict[tuple[str, str, str], pd.Series]:
    """The summary's rows by (method, category, metric); missing columns or a repeated key are errors."""
    missing = [c for c in SUMMARY_COLUMNS if c not in summary.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {', '.join(missing)}")
    rows: dict[tuple[str, str, str], pd.Series] = {}
    for _, row in summary.assign(unavailable=summary["unavailable"].fillna("").astype(str)).iterrows():
        key = (row["method"], row["category"], row["metric"])
        if key in rows:
            raise ValueError(f"{what}: more than one row for {' / '.join(key)}")
        rows[key] = row
    return rows


def _unavailable(row: pd.Series | None) -> str:
    """Why the row has no value ("" when it has one)."""
    if row is None:
        return "no row in this summary"
    if row["unavailable"]:
        return row["unavailable"]
    return "" if pd.notna(row["mean"]) else "no mean, though no reason is given"


def regressions(
    summary: pd.DataFrame, baseline: pd.DataFrame | None = None, tolerance: float = 0.05
) -> pd.DataFrame:
    """One row per (method, category, metric) that regresses, `rules` saying which rule(s):
    `below_threshold` (the summary's own flag), `below_baseline` (the mean fell below the baseline's
    by more than `tolerance`) or `became_unavailable` (computed in the baseline, unavailable or absent
    now). A metric unavailable in both, or unavailable now with no baseline value, does not regress.
    """
    if not 0 <= tolerance <= 1:
        raise ValueError(f"tolerance {tolerance}: must be between 0 and 1")
    current = _checked_summary(summary, "the diagnostics summary")
    before = {} if baseline is None else _checked_summary(baseline, "the baseline")
    found = []
    for key in [*current, *(k for k in before if k not in current)]:
        row, base = current.get(key), before.get(key)
        reason = _unavailable(row)
        # `row is None` always has a reason; said again here for the type checker
        value = math.nan if reason or row is None else float(row["mean"])
        base_value = float(base["mean"]) if base is not None and not _unavailable(base) else math.nan
        rules, below_threshold_by, below_baseline_by = [], math.nan, math.nan
        if row is not None and not reason and bool(row["below_threshold"]):
            rules.append("below_threshold")
            below_threshold_by = float(row["threshold"]) - value
        if not math.isnan(base_value):
            if reason:
                rules.append("became_unavailable")
            elif base_value - value > tolerance + _ROUNDING:
                rules.append("below_baseline")
                below_baseline_by = base_value - value
        if rules:
            found.append(
                [
                    *key,
                    "+".join(rules),
                    value,
                    int(row["n"]) if row is not None else 0,
                    float(row["threshold"]) if row is not None else math.nan,
                    below_threshold_by,
                    base_value,
                    below_baseline_by,
                    tolerance,
                    reason,
                ]
            )
    return pd.DataFrame(found, columns=REGRESSION_COLUMNS)


def summary_path(run_dir: Path) -> Path:
    """Where a notebook-09 run saves its diagnostics summary (`RunContext.save_table`)."""
    return saved_table_path(run_dir, SUMMARY_TABLE)


def read_summary(run_dir: Path) -> pd.DataFrame:
    """A notebook-09 run's diagnostics summary table."""
    path = summary_path(run_dir)
    if not path.is_file():
        raise FileNotFoundError(f"the run saved no {SUMMARY_TABLE} table")
    return pd.read_parquet(path)


def _json_value(value: Any) -> Any:
    """A summary cell as JSON: NaN as null, numpy scalars as Python ones."""
    if isinstance(value, str):
        return value
    if pd.isna(value):
        return None
    return value.item() if hasattr(value, "item") else value


def save_baseline(
    summary: pd.DataFrame, path: str | Path, *, run_id: str, settings_hash: str, git_commit: str
) -> Path:
    """Write `summary`'s rows as a baseline JSON file with the run's provenance; validated as
    `load_baseline` reads it, so a saved baseline always loads.
    """
    checked = _checked_summary(summary, "the diagnostics summary").values()
    rows = [{c: _json_value(row[c]) for c in SUMMARY_COLUMNS} for row in checked]
    record = {
        "kind": BASELINE_KIND,
        "git_commit": git_commit,
        "run_id": run_id,
        "settings_hash": settings_hash,
        "saved_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "rows": rows,
    }
    try:
        Baseline.model_validate(record)
    except ValidationError as err:  # a summary that breaks its contract, e.g. a row without `n`
        raise ValueError(str(params_error("the diagnostics summary", err))) from None
    return write_json(Path(path), record)


def load_baseline(path: str | Path) -> Baseline:
    """Read a baseline file; every error names the file, and a bad row its index and field."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: baseline file not found")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise ParamsError(f"{path}: not a UTF-8 text file (byte {err.start}); a baseline is JSON") from None
    except json.JSONDecodeError as err:
        raise ParamsError(
            f"{path}: not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}"
        ) from None
    try:
        return Baseline.model_validate(raw)
    except ValidationError as err:
        raise params_error(f"{path} (a baseline written by ragtrial diagnose --save-baseline)", err) from None


def _number(value: float) -> str:
    return f"{value:.3f}"


def render_regressions(
    found: pd.DataFrame, *, run_id: str, checked: int, baseline: str | None, tolerance: float
) -> list[str]:
    """The printed lines: a heading for the run (how many metrics were checked against what), then one
    line per regressed metric saying which rule and by how much.
    """
    against = "their thresholds" + (f" and baseline {baseline}, tolerance {tolerance:g}" if baseline else "")
    if found.empty:
        return [f"{run_id}: no regression ({checked} metrics checked against {against})"]
    lines = [f"{run_id}: {len(found)} regression(s) among {checked} metrics checked against {against}"]
    for r in found.itertuples(index=False):
        said = []
        if "below_threshold" in r.rules:
            said.append(
                f"{_number(r.value)} (n {r.n}) is below its threshold {_number(r.threshold)} "
                f"by {_number(r.below_threshold_by)}"
            )
        if "below_baseline" in r.rules:
            said.append(
                f"{_number(r.value)} (n {r.n}) is {_number(r.below_baseline_by)} below the baseline's "
                f"{_number(r.baseline)}, more than the tolerance {r.tolerance:g}"
            )
        if "became_unavailable" in r.rules:
            said.append(f"unavailable now ({r.unavailable}), {_number(r.baseline)} in the baseline")
        lines.append(f"  REGRESSED {r.method} / {r.category} / {r.metric}: " + "; ".join(said))
    return lines
