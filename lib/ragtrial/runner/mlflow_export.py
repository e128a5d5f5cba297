"""Finished runs as MLflow runs (`ragtrial export mlflow`, `ragtrial run --mlflow`), read from their run
folders: one MLflow run per ragtrial run, found again by its `ragtrial.run_id` tag, so a second export
updates it instead of adding another.

- params: the recorded settings as dotted keys (`retrieval.k`), and `ragtrial.model`, `ragtrial.data`,
  `ragtrial.prompts`, `ragtrial.served_models`, `ragtrial.git_commit` (as `ragtrial compare` shows them);
  a value longer than MLflow's limit is cut, marked, and its key listed in the `ragtrial.truncated_params`
  tag (run.json, an artifact, holds it whole).
- metrics: per saved table with a `method` column, each mean and its interval ends (`summary_metrics`),
  and the run's ledger totals and latency (`cost/<quantity>`).
- tags: `ragtrial.run_id`, `ragtrial.notebook`, `ragtrial.batch`, `ragtrial.label`, `ragtrial.embedded`
  (the embedded smoke-test model or not), MLflow's git commit and note (the run's headline).
- artifacts: report.html, run.json, ledger.csv and tables/*.csv.

Secrets are never logged: every param, tag and text artifact passes through `redact.redact` with the
values of the environment variables the run's `*_env` settings name (API keys, passwords) and URL
user-info masked. MLflow is imported only here, and only when an export is asked for.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import numbers
import os
import re
import tempfile
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pandas as pd

from ragtrial.config.base import ParamsError
from ragtrial.redact import redact, redact_url, setting_strings
from ragtrial.report.files import read_saved_tables
from ragtrial.report.index_page import RunRecord, batch_file, read_run_record
from ragtrial.runner.checks import NotReady
from ragtrial.runner.combined_runs import flat_settings
from ragtrial.runner.compared_runs import run_costs, run_row
from ragtrial.runner.execute import LEDGER_FILE

EXTRA = "pip install 'ragtrial[mlflow]'"
EXPERIMENT = "ragtrial"
RUN_ID_TAG = "ragtrial.run_id"
TRUNCATED_TAG = "ragtrial.truncated_params"
TRUNCATION_MARK = "...[truncated]"
# The columns that name a row of a long summary table (`mean`, `ci_low`, `ci_high`), in this order:
# the metric is `<table>/<method>/<the others present>/<measure>`.
NAME_COLUMNS = (
    "method",
    "group",  # notebook 13's retriever groups
    "partner",
    "baseline",
    "subset",  # a paired table's "all" questions or those with "no fallback"
    "question_type",
    "category",
    "level",
    "aspect",
    "measure",
    "metric",
    "threshold",
)
VALUE_COLUMNS = ("mean", "mean_diff")  # a long table's point estimate, the first one present
ARTIFACTS = ("report.html", "run.json", LEDGER_FILE)
HEALTH_TIMEOUT_S = 10
BATCH_SIZE = 100  # params or tags per `log_batch` call (MLflow's limit; 1000 for metrics)
METRIC_BATCH_SIZE = 1000


class TrackingUnreachable(NotReady):
    """The tracking URI does not answer, or its store cannot be opened; the message names the URI."""


@dataclass(frozen=True)
class Exported:
    """What one export did: the ragtrial run, its MLflow run, and whether that was `created`, `updated`
    or `replaced` (a param's value changed, as after a re-run at another commit: MLflow keeps params
    immutable, so the old MLflow run is deleted and a new one made).
    """

    run_id: str
    mlflow_run_id: str
    action: str
    params: int  # logged now: an update logs only the params the MLflow run lacks
    metrics: int
    artifacts: int
    truncated: tuple[str, ...]


def import_mlflow():
    """The `mlflow` module; a ParamsError naming the extra when it is not installed."""
    try:
        import mlflow
    except ImportError as err:
        if (err.name or "").split(".")[0] != "mlflow":
            raise
        raise ParamsError(
            f"MLflow export: mlflow is not installed here; install the extra with {EXTRA}"
        ) from None
    return mlflow


def default_tracking_uri(outputs: Path) -> str:
    """$MLFLOW_TRACKING_URI, else a SQLite store in the outputs folder (`outputs/mlflow.db`)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path(outputs).resolve() / 'mlflow.db'}"


# ---------------------------------------------------------------- what a run folder gives


def recorded_secret_variables(settings: dict[str, Any]) -> list[str]:
    """The environment variables a run's recorded settings name for its secrets (every `*_env` key)."""
    return [value for key, value in setting_strings(settings) if key.endswith("_env")]


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def run_params(run: RunRecord) -> dict[str, str]:
    """The run's settings as dotted keys and what it used (model, data set, prompt versions, served
    models, git commit), as strings, not yet redacted or cut.
    """
    record = run.readable_record
    params = {key: _shown(value) for key, value in flat_settings(record.get("settings", {})).items()}
    used = run_row(0, run, [])
    return params | {
        f"ragtrial.{name}": str(used[name])
        for name in ("model", "data", "prompts", "served_models", "git_commit")
    }


def run_tags(run: RunRecord) -> dict[str, str]:
    """The run's tags, not yet redacted: its ids, notebook, batch, label, embedded or not, headline."""
    record = run.readable_record
    llm = record.get("settings", {}).get("llm", {})
    tags = {
        RUN_ID_TAG: run.run_dir.name,
        "ragtrial.notebook": str(record.get("notebook", "")),
        "ragtrial.batch": batch_file(record),
        "ragtrial.label": str(record.get("label", "")),
        "ragtrial.embedded": "true" if llm.get("backend") == "embedded" else "false",
        "mlflow.runName": run.run_dir.name,
        "mlflow.source.git.commit": str(record.get("git_commit", "")),
        "mlflow.note.content": str(record.get("headline", "")),
    }
    return {key: value for key, value in tags.items() if value}


def metric_key(key: str) -> str:
    """`key` in MLflow's alphabet for metric names (letters, digits, `_ - . : /` and spaces): any other
    character as `_`.
    """
    return re.sub(r"[^\w.\- :/]", "_", key)


def metric_part(value: Any) -> str:
    """One part of a metric name: `@` read as `_at_` (recall@5 → recall_at_5), `/` (the parts' separator)
    as `_`, in MLflow's alphabet (`metric_key`).
    """
    return metric_key(str(value).replace("@", "_at_").replace("/", "_"))


def _number(value: Any) -> float | None:
    """A finite number as a float; None for text, a flag, NaN or a missing value."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return float(value) if math.isfinite(value) else None


def _table_metrics(name: str, table: pd.DataFrame) -> dict[str, float]:
    """A table's means and interval ends per row: wide (`X`, `X_low`, `X_high` columns, as
    `evaluation.score_tables.method_summary` writes) and long (`mean` or `mean_diff` with `ci_low`,
    `ci_high`, the row named by its `NAME_COLUMNS`).
    """
    wide = [c for c in table.columns if f"{c}_low" in table.columns and f"{c}_high" in table.columns]
    value = next((c for c in VALUE_COLUMNS if c in table.columns), None)
    long = value is not None and {"ci_low", "ci_high"} <= set(table.columns)
    # a long table's measure: its `measure` column, else its `metric` column, else the value's name
    measure_column = next((c for c in ("measure", "metric") if c in table.columns), None)
    named = [c for c in NAME_COLUMNS if c in table.columns and c != measure_column]
    found: dict[str, float] = {}
    for row in table.to_dict("records"):
        prefix = "/".join(metric_part(part) for part in [name, *(row[c] for c in named)])
        ends = [(measure, measure, f"{measure}_low", f"{measure}_high") for measure in wide]
        if long:
            measure = row[measure_column] if measure_column else value
            ends.append((measure, value, "ci_low", "ci_high"))
        for measure, *columns in ends:
            for suffix, column in zip(("", "_low", "_high"), columns, strict=True):
                number = _number(row[column])
                if number is not None:
                    found[f"{prefix}/{metric_part(measure)}{suffix}"] = number
    return found


def summary_metrics(tables: dict[str, pd.DataFrame]) -> dict[str, float]:
    """Every saved table with a `method` column: each mean and interval end per row (`_table_metrics`),
    named `<table>/<method>[/<other name columns>]/<measure>[_low|_high]`. A name two rows of a table
    share is left out (the table says which row it is; the metric could not).
    """
    metrics: dict[str, float] = {}
    for name, table in tables.items():
        if "method" not in table.columns or table.empty:
            continue
        rows = [_table_metrics(name, table.iloc[[i]]) for i in range(len(table))]
        counts: dict[str, int] = {}
        for row in rows:
            for key in row:
                counts[key] = counts.get(key, 0) + 1
        metrics |= {key: value for row in rows for key, value in row.items() if counts[key] == 1}
    return metrics


def cost_metrics(run: RunRecord) -> dict[str, float]:
    """The run's ledger totals, wall time and live-call latency (`compared_runs.run_costs`) as `cost/<q>`."""
    return {f"cost/{quantity}": value for quantity, value in run_costs(run).items() if math.isfinite(value)}


def _cut(value: str, limit: int) -> tuple[str, bool]:
    return (
        (value, False)
        if len(value) <= limit
        else (value[: limit - len(TRUNCATION_MARK)] + TRUNCATION_MARK, True)
    )


def _milliseconds(timestamp: Any) -> int | None:
    try:
        return int(dt.datetime.fromisoformat(str(timestamp)).timestamp() * 1000)
    except ValueError:
        return None


def write_artifacts(run: RunRecord, folder: Path, secrets: list[str]) -> int:
    """The run's report, record, ledger and table CSVs copied into `folder`, redacted; their count."""
    sources = [run.run_dir / name for name in ARTIFACTS] + sorted((run.run_dir / "tables").glob("*.csv"))
    written = 0
    for source in sources:
        if not source.is_file():
            continue
        target = folder / source.relative_to(run.run_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(redact(source.read_text(encoding="utf-8"), secrets), encoding="utf-8")
        written += 1
    return written


# ---------------------------------------------------------------- the tracking server


def _first_line(err: Exception) -> str:
    """An error as one line (its first; its type when it has no message), URL user-info masked."""
    text = str(err).strip()
    return redact_url(text.splitlines()[0] if text else type(err).__name__)


def _answers(uri: str) -> str:
    """Why an http(s) tracking server does not answer its health check ("" when it does)."""
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=HEALTH_TIMEOUT_S) as reply:
            return "" if reply.status == 200 else f"health check answered {reply.status}"
    except urllib.error.HTTPError as err:
        return f"health check answered {err.code}"
    except (urllib.error.URLError, OSError) as err:
        return str(getattr(err, "reason", err))


class MlflowExport:
    """An MLflow tracking store (`uri`) and experiment (created when absent) to export runs into. Opening
    it checks both: a server that does not answer, or a store that cannot be opened, is a
    `TrackingUnreachable` naming the URI, before any run is exported.
    """

    def __init__(self, uri: str, experiment: str = EXPERIMENT):
        mlflow = import_mlflow()
        from mlflow.tracking import MlflowClient
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH, MAX_TAG_VAL_LENGTH

        self.uri, self.shown_uri = uri, redact_url(uri)
        self._lock = threading.Lock()  # a batch's runs finish on several threads; one export at a time
        self.param_limit, self.tag_limit = MAX_PARAM_VAL_LENGTH, MAX_TAG_VAL_LENGTH
        self._entities = mlflow.entities
        if urlsplit(uri).scheme in ("http", "https") and (why := _answers(uri)):
            raise TrackingUnreachable(f"MLflow tracking URI {self.shown_uri} does not answer ({why})")
        self.client = MlflowClient(tracking_uri=uri)
        try:  # any failure to open the store is the URI's problem, said in one line
            found = self.client.get_experiment_by_name(experiment)
            self.experiment_id = (
                found.experiment_id
                if found is not None
                else self.client.create_experiment(experiment, artifact_location=self._artifact_location())
            )
        except Exception as err:
            raise TrackingUnreachable(f"MLflow tracking URI {self.shown_uri}: {_first_line(err)}") from None

    def _artifact_location(self) -> str | None:
        """Beside a local SQLite store, `<db>-artifacts/` (MLflow's default is relative to the working
        directory); a server or another store chooses its own.
        """
        parts = urlsplit(self.uri)
        if parts.scheme != "sqlite" or not parts.path.startswith("/"):
            return None
        database = Path(parts.path[1:] if parts.path.startswith("//") else parts.path)
        return (database.parent / f"{database.stem}-artifacts").as_uri()

    def existing(self, run_id: str):
        """The active MLflow run tagged with ragtrial run `run_id`, or None."""
        found = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}'", max_results=2
        )
        return found[0] if found else None

    def export(self, run: RunRecord) -> Exported:
        """Log the completed run `run` (created, updated in place, or replaced when a param changed)."""
        record = run.readable_record
        secrets = recorded_secret_variables(record.get("settings", {}))
        truncated = []
        params = {}
        for key, value in run_params(run).items():
            params[key], cut = _cut(redact(value, secrets), self.param_limit)
            if cut:
                truncated.append(key)
        tags = {key: _cut(redact(value, secrets), self.tag_limit)[0] for key, value in run_tags(run).items()}
        if truncated:
            tags[TRUNCATED_TAG] = ", ".join(truncated)
        metrics = {
            metric_key(redact(key, secrets)): value
            for key, value in (summary_metrics(read_saved_tables(run.run_dir)) | cost_metrics(run)).items()
        }

        previous = self.existing(run.run_dir.name)
        action = "created"
        if previous is not None:
            logged = previous.data.params
            if any(logged[key] != value for key, value in params.items() if key in logged):
                self.client.delete_run(previous.info.run_id)
                action, previous = "replaced", None
            else:
                action = "updated"
                params = {key: value for key, value in params.items() if key not in logged}
        if previous is None:
            mlflow_run = self.client.create_run(
                self.experiment_id, start_time=_milliseconds(record.get("started_at")), tags=tags
            )
            mlflow_run_id = mlflow_run.info.run_id
        else:
            mlflow_run_id = previous.info.run_id
        self._log(mlflow_run_id, params, metrics, tags)
        with tempfile.TemporaryDirectory(prefix="ragtrial-mlflow-") as folder:
            artifacts = write_artifacts(run, Path(folder), secrets)
            self.client.log_artifacts(mlflow_run_id, folder)
        self.client.set_terminated(mlflow_run_id, "FINISHED", end_time=_milliseconds(record.get("ended_at")))
        return Exported(
            run.run_dir.name, mlflow_run_id, action, len(params), len(metrics), artifacts, tuple(truncated)
        )

    def export_finished(self, run_dir: Path) -> str:
        """`ragtrial run --mlflow`: export a run its batch just finished; what happened, as a line of the
        batch's log. A failed export is said, not raised: the run stays completed, and
        `ragtrial export mlflow <run>` exports it later.
        """
        with self._lock:
            try:
                done = self.export(read_run_record(run_dir))
            except Exception as err:  # any failure: one line in the log, the batch goes on
                return (
                    f"mlflow: {run_dir.name} not exported ({_first_line(err)}); "
                    f"`ragtrial export mlflow {run_dir.name}` retries"
                )
        return f"mlflow: {done.run_id} {done.action} as MLflow run {done.mlflow_run_id} in {self.shown_uri}"

    def _log(
        self, run_id: str, params: dict[str, str], metrics: dict[str, float], tags: dict[str, str]
    ) -> None:
        entities = self._entities
        now = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
        param_list = [entities.Param(k, v) for k, v in params.items()]
        tag_list = [entities.RunTag(k, v) for k, v in tags.items()]
        metric_list = [entities.Metric(k, v, now, 0) for k, v in metrics.items()]
        for i in range(0, max(len(param_list), len(tag_list)), BATCH_SIZE):
            self.client.log_batch(
                run_id, params=param_list[i : i + BATCH_SIZE], tags=tag_list[i : i + BATCH_SIZE]
            )
        for i in range(0, len(metric_list), METRIC_BATCH_SIZE):
            self.client.log_batch(run_id, metrics=metric_list[i : i + METRIC_BATCH_SIZE])
