"""Batch execution: each run is one (notebook, resolved settings) pair with id
`<notebook>-<settings hash>`; its folder `outputs/<run_id>/` holds the executed notebook,
`report.html`, `run.json`, `ledger.csv` and the result tables. A run whose folder already says
`completed` is skipped unless forced; an interrupted one resumes from the cache.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrial.config.batch import RunSpec, load_batch
from ragtrial.llm.ledger import read_ledger, summarize
from ragtrial.redact import redact
from ragtrial.report.files import write_json, write_table
from ragtrial.report.html import render_index, render_report
from ragtrial.runner.context import git_commit, package_versions, secret_variables
from ragtrial.runner.credentials import kernel_options, mask_credentials


@dataclass
class RunResult:
    run_id: str
    notebook: str
    status: str  # completed | failed | skipped
    run_dir: Path
    summary: dict[str, Any]
    error: str = ""


def read_run_json(run_dir: Path) -> dict[str, Any] | None:
    import json

    path = run_dir / "run.json"
    return json.loads(path.read_text()) if path.is_file() else None


def execute_run(
    spec: RunSpec, root: Path, outputs: Path, force: bool = False, show_code: bool = False
) -> RunResult:
    import papermill

    run_dir = outputs / spec.run_id
    previous = read_run_json(run_dir)
    if previous and previous.get("status") == "completed" and not force:
        return RunResult(spec.run_id, spec.notebook, "skipped", run_dir, previous.get("ledger", {}))
    if run_dir.exists():
        shutil.rmtree(run_dir)  # a re-run starts clean; the cache keeps what was paid for
    run_dir.mkdir(parents=True)
    settings, credentials = mask_credentials(spec.settings.model_dump(mode="json"))
    secrets = secret_variables(spec.settings)
    record: dict[str, Any] = {
        "run_id": spec.run_id,
        "notebook": spec.notebook,
        "label": spec.label,
        "status": "running",
        "settings": settings,
        "git_commit": git_commit(root),
        "packages": package_versions(),
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": redact(" ".join(sys.argv), secrets),
    }
    write_json(run_dir / "run.json", record)
    started = time.perf_counter()
    error = ""
    try:
        papermill.execute_notebook(
            str(root / "notebooks" / f"{spec.notebook}.ipynb"),
            str(run_dir / "notebook.ipynb"),
            parameters={"settings": settings, "run_dir": str(run_dir)},
            cwd=str(root),
            progress_bar=False,
            kernel_name="python3",
            **kernel_options(credentials),
        )
    except KeyboardInterrupt:
        # What was paid for is in the cache; the record says so and the next run resumes.
        write_json(run_dir / "run.json", _finished(record, run_dir, "interrupted", "interrupted", started))
        raise
    except Exception as err:  # noqa: BLE001 - recorded in run.json and shown in the index
        error = redact(f"{type(err).__name__}: {err}", secrets).strip()[:4000]
        (run_dir / "error.txt").write_text(redact(traceback.format_exc(), secrets))
    record = _finished(record, run_dir, "failed" if error else "completed", error, started)
    if (run_dir / "notebook.ipynb").exists():
        render_report(run_dir / "notebook.ipynb", run_dir / "report.html", show_code=show_code)
    write_json(run_dir / "run.json", record)
    return RunResult(spec.run_id, spec.notebook, record["status"], run_dir, record["ledger"], error)


def _finished(
    record: dict[str, Any], run_dir: Path, status: str, error: str, started: float
) -> dict[str, Any]:
    """The run record with its outcome, duration and the ledger summary (also saved as parquet)."""
    ledger = read_ledger(run_dir / "ledger.csv")
    if not ledger.empty:
        write_table(run_dir / "ledger.parquet", ledger)
    return {
        **record,
        "status": status,
        "error": error,
        "ended_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - started, 2),
        "ledger": summarize(ledger),
        "prompts": sorted(p for p in ledger["prompt"].unique() if p) if not ledger.empty else [],
        "models": sorted(ledger["model"].unique()) if not ledger.empty else [],
    }


def run_batch(
    batch_path: str | Path,
    overrides: dict[str, Any] | None = None,
    root: str | Path = ".",
    outputs: str | Path | None = None,
    only: list[str] | None = None,
    force: bool = False,
    workers: int | None = None,
    show_code: bool = False,
    log=print,
) -> list[RunResult]:
    """Validate every run of the batch first (no model call before that), then execute them."""
    root = Path(root).resolve()
    outputs = Path(outputs).resolve() if outputs else root / "outputs"
    specs, batch_workers = load_batch(batch_path, overrides, notebooks_dir=root / "notebooks")
    if only:
        specs = [s for s in specs if s.notebook in only]
    outputs.mkdir(parents=True, exist_ok=True)
    results: list[RunResult] = []

    def one(numbered: tuple[int, RunSpec]) -> RunResult:
        i, spec = numbered
        log(f"[{i}/{len(specs)}] {spec.run_id} {spec.label} ...")
        result = execute_run(spec, root, outputs, force=force, show_code=show_code)
        s = result.summary
        log(
            f"[{i}/{len(specs)}] {spec.run_id}: {result.status} (live calls {s.get('llm_calls_live', 0)}, "
            f"cached {s.get('llm_calls_cached', 0)}, failures {s.get('failures', 0)})"
            + (f" -- {result.error.splitlines()[0]}" if result.error else "")
        )
        render_index(outputs)
        return result

    numbered, n_workers = list(enumerate(specs, start=1)), workers or batch_workers
    try:
        if n_workers == 1:  # in this thread, so an interrupt stops the running notebook at once
            results = [one(n) for n in numbered]
        else:
            with ThreadPoolExecutor(max_workers=n_workers) as pool:
                results = list(pool.map(one, numbered))
    finally:
        render_index(outputs)
    return results
