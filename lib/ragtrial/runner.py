"""Runs: the context a notebook opens, and the papermill batch runner around it.

A run is one (notebook, resolved settings) pair with id `<notebook>-<settings hash>`; its folder
`outputs/<run_id>/` holds the executed notebook, `report.html`, `run.json`, `ledger.csv` and the
result tables. A run whose folder already says `completed` is skipped unless forced.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ragtrial import files
from ragtrial.cache import ResponseCache
from ragtrial.config import ParamsError, RunSpec, Settings, load_batch, validate_settings
from ragtrial.ledger import Ledger, by_stage, read_ledger, summarize
from ragtrial.llm import LLM, Embedder
from ragtrial.report import render_index, render_report

TRACKED_PACKAGES = [
    "ragtrial",
    "openai",
    "llama_cpp_python",
    "llama-index-core",
    "torch",
    "sentence-transformers",
    "graspologic-native",
    "scikit-learn",
    "rouge-score",
    "bert-score",
    "pandas",
    "numpy",
    "papermill",
]
EMBEDDED_WARNING = (
    "This report was produced by the embedded default model, Gemma 3 270M (a base, not "
    "instruction-tuned, model quantized to 4 bits). Its job is to prove the pipeline runs "
    "offline end to end; its answers, judgments and extractions are not research findings. "
    "Point `llm.base_url` at a capable OpenAI-compatible model for research-grade runs."
)


def _endpoint_resolver(settings: Settings, run_dir: Path):
    llm = settings.llm
    if llm.backend == "embedded":

        def resolve() -> str:
            from ragtrial.server import ensure_embedded

            return ensure_embedded(llm, run_dir / "server.log")

        return resolve
    if not llm.base_url:
        raise ParamsError("key 'llm.base_url': required when llm.backend is 'openai_compatible'")
    return lambda: llm.base_url


@dataclass
class RunContext:
    """What a notebook works with: settings, the run folder, and the only doors to a model."""

    settings: Settings
    run_dir: Path
    run_id: str
    notebook: str
    ledger: Ledger
    cache: ResponseCache
    llm: LLM
    embedder: Embedder
    tables: list[str] = field(default_factory=list)

    def save_table(self, frame: pd.DataFrame, name: str) -> Path:
        """Result table as Parquet (and CSV for quick reading) under `<run_dir>/tables/`."""
        self.tables.append(name)
        files.write_table(self.run_dir / "tables" / f"{name}.csv", frame)
        return files.write_table(self.run_dir / "tables" / f"{name}.parquet", frame)

    def ledger_frame(self) -> pd.DataFrame:
        return self.ledger.frame()

    def cost_by_stage(self) -> pd.DataFrame:
        return by_stage(self.ledger.frame())

    def provenance(self) -> pd.DataFrame:
        """The facts a reader needs to trace every number in the report."""
        s = self.settings
        endpoint = "embedded llama.cpp server (127.0.0.1)" if s.llm.backend == "embedded" else s.llm.base_url
        data = s.data.dataset + (f" ({s.data.path})" if s.data.path else f" (size {s.data.size})")
        rows = [
            ("run id", self.run_id),
            ("notebook", self.notebook),
            ("LLM", f"{s.llm.model} via {endpoint}"),
            ("sampling", f"temperature {s.llm.temperature}, top_p {s.llm.top_p}, seed {s.llm.seed}"),
            ("embeddings", f"{s.embeddings.model} ({s.embeddings.backend})"),
            ("data", f"{data}, seed {s.data.seed}"),
            ("parameters", "run.json in this run's folder"),
        ]
        return pd.DataFrame(rows, columns=["what", "value"])

    def is_embedded_default(self) -> bool:
        return self.settings.llm.backend == "embedded"

    def banner(self) -> Any:
        """Markdown shown at the top of every report: provenance, and the weak-model warning."""
        from IPython.display import Markdown

        lines = ["| what | value |", "|---|---|"]
        lines += [f"| {w} | {v} |" for w, v in self.provenance().itertuples(index=False)]
        text = "\n".join(lines)
        if self.is_embedded_default():
            text = f"> **Embedded default model.** {EMBEDDED_WARNING}\n\n{text}"
        return Markdown(text)

    def prompt_versions(self) -> list[str]:
        ledger = self.ledger.frame()
        return sorted(p for p in ledger["prompt"].unique() if p)


def open_run(
    settings: dict[str, Any] | Settings | None = None,
    run_dir: str | Path | None = None,
    notebook: str = "interactive",
    outputs: str | Path = "outputs",
) -> RunContext:
    """Open a run from a notebook. papermill injects `settings` and `run_dir`; interactively both
    may be omitted (code defaults, folder `outputs/interactive/<notebook>`).
    """
    # Progress bars of model loading are noise in a rendered report.
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if not isinstance(settings, Settings):
        settings = validate_settings(settings or {}, f"settings of notebook {notebook}")
    run_id = RunSpec(notebook=notebook, settings=settings).run_id
    run_dir = Path(run_dir) if run_dir else Path(outputs) / "interactive" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    cache = ResponseCache(settings.cache_path)
    ledger = Ledger(run_id, run_dir / "ledger.csv")
    llm = LLM(settings.llm, cache, ledger, _endpoint_resolver(settings, run_dir))
    embedder = Embedder(settings.embeddings, cache, ledger, settings.llm)
    return RunContext(settings, run_dir, run_id, notebook, ledger, cache, llm, embedder)


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def git_commit(root: Path) -> str:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


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
    record: dict[str, Any] = {
        "run_id": spec.run_id,
        "notebook": spec.notebook,
        "label": spec.label,
        "status": "running",
        "settings": spec.settings.model_dump(mode="json"),
        "git_commit": git_commit(root),
        "packages": package_versions(),
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
    }
    files.write_json(run_dir / "run.json", record)
    started = time.perf_counter()
    error = ""
    try:
        papermill.execute_notebook(
            str(root / "notebooks" / f"{spec.notebook}.ipynb"),
            str(run_dir / "notebook.ipynb"),
            parameters={"settings": spec.settings.model_dump(mode="json"), "run_dir": str(run_dir)},
            cwd=str(root),
            progress_bar=False,
            kernel_name="python3",
        )
    except KeyboardInterrupt:
        # What was paid for is in the cache; the record says so and the next run resumes.
        files.write_json(
            run_dir / "run.json", _finished(record, run_dir, "interrupted", "interrupted", started)
        )
        raise
    except Exception as err:  # noqa: BLE001 - recorded in run.json and shown in the index
        error = f"{type(err).__name__}: {err}".strip()[:4000]
        (run_dir / "error.txt").write_text(traceback.format_exc())
    record = _finished(record, run_dir, "failed" if error else "completed", error, started)
    if (run_dir / "notebook.ipynb").exists():
        render_report(run_dir / "notebook.ipynb", run_dir / "report.html", show_code=show_code)
    files.write_json(run_dir / "run.json", record)
    return RunResult(spec.run_id, spec.notebook, record["status"], run_dir, record["ledger"], error)


def _finished(
    record: dict[str, Any], run_dir: Path, status: str, error: str, started: float
) -> dict[str, Any]:
    """The run record with its outcome, duration and the ledger summary (also saved as parquet)."""
    ledger = read_ledger(run_dir / "ledger.csv")
    if not ledger.empty:
        files.write_table(run_dir / "ledger.parquet", ledger)
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
