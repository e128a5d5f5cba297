"""One run of a batch: a notebook executed by papermill in its run folder, under the folder's lock.

A run is one (notebook, resolved settings) pair with id `<notebook>-<settings hash>`; its folder
`outputs/<run_id>/` holds the executed notebook, `report.html`, `run.json`, `ledger.csv` and the
result tables. A run whose folder already says `completed` is skipped unless forced; an interrupted
one resumes from the cache.

One process at a time works in a run folder: it holds `run.lock` there (`ragtrial.locks`), and a
second process asking for the same run refuses it (status `locked`, naming the holder's pid)
instead of paying for the same calls twice. An attempt that did not complete (killed, interrupted,
failed) leaves its ledger behind as `ledger.attempt-<n>.csv`; the next attempt keeps it, so
`run.json` says what each attempt paid and the total, and `ledger.parquet` holds every attempt's
rows, marked with the attempt's number and outcome. Both engines (`runner.batch`'s threads and
`runner.ray_engine`'s tasks) call `execute_run`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ragtrial.config.batch import RunSpec, notebook_file
from ragtrial.config.paths import notebooks_dir
from ragtrial.llm.ledger import read_ledger, summarize
from ragtrial.llm.progress import PROGRESS_FILE
from ragtrial.locks import FolderLock, LockHeld
from ragtrial.methods.upstream.environments import SYSTEMS_RECORD
from ragtrial.redact import redact
from ragtrial.report.files import write_json, write_table
from ragtrial.report.html import render_report
from ragtrial.runner.checks import run_folder
from ragtrial.runner.context import HEADLINE_FILE, git_commit, package_versions, secret_variables
from ragtrial.runner.credentials import mask_credentials
from ragtrial.runner.kernel import KERNEL_LOG, failure_reason, kernel_options

LOCK_FILE = "run.lock"
LEDGER_FILE = "ledger.csv"


@dataclass
class RunResult:
    run_id: str
    notebook: str
    status: str  # completed | failed | skipped | locked | interrupted
    run_dir: Path
    summary: dict[str, Any]
    error: str = ""


def read_run_json(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / "run.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _earlier_attempts(run_dir: Path, previous: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The attempts before this one that did not complete, their ledgers kept as attempt files.

    Called with the run's lock held, so a record still saying `running` belongs to a process that
    is gone (killed): its ledger rows are what it paid, and they stay in the run's record.
    """
    if previous is None or previous.get("status") == "completed":
        return []  # a first run, or a forced re-run of a completed one: a fresh record
    attempts = list(previous.get("attempts", []))
    number = len(attempts) + 1
    kept = run_dir / f"ledger.attempt-{number}.csv"
    if (run_dir / LEDGER_FILE).exists():
        os.replace(run_dir / LEDGER_FILE, kept)
    status = previous.get("status", "unknown")
    attempts.append(
        {
            "attempt": number,
            "status": "killed" if status == "running" else status,
            "started_at": previous.get("started_at", ""),
            "ended_at": previous.get("ended_at", ""),
            "error": previous.get("error", ""),
            "ledger_file": kept.name,
            "ledger": summarize(read_ledger(kept)),
        }
    )
    return attempts


def _clear_run_folder(run_dir: Path, keep: set[str]) -> None:
    """Everything but the lock file and the kept ledgers goes: a re-run starts clean (the cache keeps
    what was paid for). The lock file stays, so the lock this process holds stays the folder's lock.
    """
    for entry in run_dir.iterdir():
        if entry.name in keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def execute_run(
    spec: RunSpec,
    root: Path,
    outputs: Path,
    force: bool = False,
    show_code: bool = False,
    batch: dict[str, Any] | None = None,
    on_start: Callable[[Path], None] | None = None,
    command: str | None = None,
    kernel_environment: Callable[[], Mapping[str, str]] | None = None,
) -> RunResult:
    """Run one notebook in its run folder, holding the folder's lock (status `locked` if another holds it).
    `batch` (`batch_record`) is recorded in `run.json`, so the verdict can find its batch's runs;
    `on_start(run_dir)` is called once the folder is cleared and its record says `running`; `command`
    is the command line `run.json` records (default: this process's; a Ray task's is the driver's);
    `kernel_environment`: the variables the batch adds to the notebook kernel's environment, asked for
    only when the notebook will execute.
    """
    run_dir = run_folder(outputs, spec.run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        lock = FolderLock(run_dir / LOCK_FILE).acquire()
    except LockHeld as held:
        return RunResult(spec.run_id, spec.notebook, "locked", run_dir, {}, f"{held}; not run")
    try:
        return _execute_locked(
            spec, root, run_dir, force, show_code, batch, on_start, command, kernel_environment or dict
        )
    finally:
        lock.release()


def _execute_locked(
    spec: RunSpec,
    root: Path,
    run_dir: Path,
    force: bool,
    show_code: bool,
    batch: dict[str, Any] | None,
    on_start: Callable[[Path], None] | None,
    command: str | None,
    kernel_environment: Callable[[], Mapping[str, str]],
) -> RunResult:
    import papermill

    notebook = notebook_file(notebooks_dir(root), spec.notebook, f"run {spec.run_id}")
    previous = read_run_json(run_dir)
    if previous and previous.get("status") == "completed" and not force:
        return RunResult(spec.run_id, spec.notebook, "skipped", run_dir, previous.get("ledger", {}))
    attempts = _earlier_attempts(run_dir, previous)
    _clear_run_folder(run_dir, keep={LOCK_FILE} | {a["ledger_file"] for a in attempts})
    settings, credentials = mask_credentials(spec.settings.model_dump(mode="json"))
    secrets = secret_variables(spec.settings)
    record: dict[str, Any] = {
        "run_id": spec.run_id,
        "notebook": spec.notebook,
        "label": spec.label,
        "status": "running",
        "pid": os.getpid(),  # the lock holder: a `running` record whose process is gone was killed
        "settings": settings,
        "git_commit": git_commit(root),
        "packages": package_versions(),
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": redact(command or " ".join(sys.argv), secrets),
        "attempts": attempts,
        "batch": batch,
    }
    write_json(run_dir / "run.json", record)
    if on_start is not None:
        on_start(run_dir)
    started = time.perf_counter()
    error = ""
    try:
        papermill.execute_notebook(
            str(notebook),
            str(run_dir / "notebook.ipynb"),
            parameters={"settings": settings, "run_dir": str(run_dir)},
            cwd=str(root),
            progress_bar=False,
            kernel_name="python3",
            **kernel_options(credentials, run_dir, run_dir.parent, kernel_environment()),
        )
    except KeyboardInterrupt:
        # What was paid for is in the cache; the record says so and the next run resumes.
        write_json(run_dir / "run.json", _finished(record, run_dir, "interrupted", "interrupted", started))
        raise
    except Exception as err:  # noqa: BLE001 - recorded in run.json and shown in the index
        error = redact(failure_reason(err, run_dir / KERNEL_LOG), secrets)
        (run_dir / "error.txt").write_text(redact(traceback.format_exc(), secrets))
    record = _finished(record, run_dir, "failed" if error else "completed", error, started)
    if (run_dir / "notebook.ipynb").exists():
        render_report(run_dir / "notebook.ipynb", run_dir / "report.html", show_code=show_code)
    write_json(run_dir / "run.json", record)
    return RunResult(spec.run_id, spec.notebook, record["status"], run_dir, record["ledger"], error)


def record_interruption(run_dir: Path) -> None:
    """Record `interrupted` for a run still `running` after its batch stopped it: a task the batch
    cancelled may not reach its own record before its process is gone (papermill's kernel shutdown can
    outlast the batch's wait), and the next run of the batch resumes from what the cache holds either way.
    """
    record = read_run_json(run_dir)
    if not record or record.get("status") != "running":
        return
    began = dt.datetime.fromisoformat(record["started_at"])
    elapsed = (dt.datetime.now(dt.UTC) - began).total_seconds()
    error = "interrupted: the batch stopped before the run could record it"
    started = time.perf_counter() - elapsed
    write_json(run_dir / "run.json", _finished(record, run_dir, "interrupted", error, started))


def _finished(
    record: dict[str, Any], run_dir: Path, status: str, error: str, started: float
) -> dict[str, Any]:
    """The run record with its outcome, duration and the ledger summary: this attempt's, and with
    earlier attempts the total; `ledger.parquet` holds every attempt's rows, each marked with its
    attempt's number and outcome.
    """
    ledger = read_ledger(run_dir / LEDGER_FILE)
    attempts = record["attempts"]
    marked = [
        read_ledger(run_dir / a["ledger_file"]).assign(attempt=a["attempt"], attempt_status=a["status"])
        for a in attempts
    ] + [ledger.assign(attempt=len(attempts) + 1, attempt_status=status)]
    every_attempt = pd.concat([m for m in marked if not m.empty] or marked[-1:], ignore_index=True)
    if not every_attempt.empty:
        write_table(run_dir / "ledger.parquet", every_attempt)
    totals = {"ledger_all_attempts": summarize(every_attempt)} if attempts else {}
    (run_dir / PROGRESS_FILE).unlink(missing_ok=True)  # what was running; the record now says how it ended
    headline = run_dir / HEADLINE_FILE
    return {
        **record,
        "status": status,
        "error": error,
        "ended_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - started, 2),
        # the run's finding in one line, from its notebook's last cell (`RunContext.headline`)
        "headline": headline.read_text(encoding="utf-8").strip() if headline.is_file() else "",
        "ledger": summarize(ledger),
        **totals,
        "prompts": sorted(p for p in ledger["prompt"].unique() if p) if not ledger.empty else [],
        "models": sorted(ledger["model"].unique()) if not ledger.empty else [],
        # the upstream systems the run used: version, Python, index build (methods/upstream)
        "systems": _systems_used(run_dir),
        # what the endpoint said answered (the requested name above need not be it)
        "served_models": sorted(m for m in ledger["served_model"].unique() if m) if not ledger.empty else [],
    }


def _systems_used(run_dir: Path) -> dict[str, Any]:
    path = run_dir / SYSTEMS_RECORD
    return json.loads(path.read_text()) if path.is_file() else {}


def batch_record(batch_path: str | Path, root: Path, specs: list[RunSpec]) -> dict[str, Any]:
    """What `run.json` records of the batch a run belongs to: its file (relative to the project root when
    inside it, so no machine's path enters the project's records; else as given) and every run id of
    the batch in order, whatever `--only` selected.
    """
    resolved = Path(batch_path).resolve()
    inside = resolved.is_relative_to(root)
    return {
        "file": resolved.relative_to(root).as_posix() if inside else str(batch_path),
        "run_ids": [spec.run_id for spec in specs],
    }
