"""The run context a notebook opens: settings, run folder, the model doors, result tables and the
provenance the report shows.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ragtrial.config.base import ParamsError
from ragtrial.config.batch import RunSpec, deep_merge, parse_set_overrides, split_overrides
from ragtrial.config.llm import LLMSettings
from ragtrial.config.notebooks import narrative_of
from ragtrial.config.paths import output_path, project_root
from ragtrial.config.settings import Settings, validate_settings
from ragtrial.data.experiment_dataset import load_experiment_dataset
from ragtrial.data.gold import require_gold
from ragtrial.llm.cache import ResponseCache, open_cache
from ragtrial.llm.client import LLM
from ragtrial.llm.embedder import Embedder
from ragtrial.llm.ledger import Ledger, answered_by, by_stage
from ragtrial.llm.llama_build import server_version
from ragtrial.records import Dataset
from ragtrial.redact import redact_url
from ragtrial.report.files import read_saved_tables, saved_table_path, write_table, write_text
from ragtrial.report.markdown import table_cell
from ragtrial.report.narrative.common import data_warnings_note, embedded_disclaimer
from ragtrial.report.tables import install_table_formatter
from ragtrial.runner.credentials import restore_credentials
from ragtrial.runner.preflight import check_settings

if TYPE_CHECKING:
    from IPython.display import Markdown

TRACKED_PACKAGES = [
    "ragtrial",
    "openai",
    "llama-index-core",
    "torch",
    "sentence-transformers",
    "graspologic-native",
    "lightrag-hku",
    "scikit-learn",
    "rouge-score",
    "bert-score",
    "pandas",
    "numpy",
    "papermill",
]
# One sentence of the run's finding, written by the notebook's last cell (`RunContext.headline`); the
# runner copies it into run.json and the index page shows it.
HEADLINE_FILE = "headline.txt"
EMBEDDED_WARNING = embedded_disclaimer("This report's answers, judgments and extractions") + (
    " Point `llm.base_url` at a capable OpenAI-compatible model for research-grade runs."
)


def _endpoint_resolver(settings: Settings, run_dir: Path):
    llm = settings.llm
    if llm.backend == "embedded":

        def resolve() -> str:
            from ragtrial.llm.server import ensure_embedded

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
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name) or ".." in name:
            raise ValueError(
                f"table name {name!r}: a plain file name is needed (it is written under tables/)"
            )
        self.tables.append(name)
        parquet = saved_table_path(self.run_dir, name)
        write_table(parquet.with_suffix(".csv"), frame)
        return write_table(parquet, frame)

    def load_dataset(self) -> Dataset:
        """The run's data set. Flaws the loader kept as published (`Dataset.warnings`) are shown in
        the report and saved as the `data_warnings` table, so no number hides them. A notebook that
        needs gold the data set lacks (`config.notebooks.NOTEBOOKS`) stops here, before any work.
        """
        from IPython.display import Markdown, display

        dataset = load_experiment_dataset(self.settings.data)
        require_gold(dataset, self.notebook)
        if dataset.warnings:
            self.save_table(pd.DataFrame({"warning": dataset.warnings}), "data_warnings")
            display(Markdown(data_warnings_note(dataset.name, dataset.warnings)))
        return dataset

    def ledger_frame(self) -> pd.DataFrame:
        return self.ledger.frame()

    def cost_by_stage(self) -> pd.DataFrame:
        return by_stage(self.ledger.frame())

    def provenance(self) -> pd.DataFrame:
        """The facts a reader needs to trace every number in the report."""
        s = self.settings
        if s.llm.backend == "embedded":
            endpoint = "embedded llama.cpp server (127.0.0.1)"
        else:
            assert s.llm.base_url is not None  # LLMSettings requires it for an openai_compatible backend
            endpoint = redact_url(s.llm.base_url)
        data = s.data.dataset + (f" ({s.data.path})" if s.data.path else f" (size {s.data.size})")
        rows = [
            ("run id", self.run_id),
            ("notebook", self.notebook),
            ("LLM requested", f"{s.llm.model} via {endpoint}"),
            ("answered by", answered_by(self.ledger.frame())),
            ("sampling", f"temperature {s.llm.temperature}, top_p {s.llm.top_p}, seed {s.llm.seed}"),
            ("requests in flight", in_flight_note(s.llm)),
            ("embeddings", f"{s.embeddings.vectors} ({s.embeddings.backend})"),
            ("data", f"{data}, seed {s.data.seed}"),
            ("parameters", "run.json in this run's folder"),
        ]
        return pd.DataFrame(rows, columns=["what", "value"])

    def is_embedded_default(self) -> bool:
        return self.settings.llm.backend == "embedded"

    def banner(self) -> None:
        """Show the provenance and the weak-model warning at the top of the report. What answered
        is only known once calls were made, so in a notebook the banner is refreshed after every
        cell (an IPython display update), and the rendered report shows what answered the run.
        """
        from IPython import get_ipython
        from IPython.display import Markdown, display

        def text() -> Markdown:
            lines = ["| what | value |", "|---|---|"]
            lines += [f"| {w} | {table_cell(v)} |" for w, v in self.provenance().itertuples(index=False)]
            table = "\n".join(lines)
            if self.is_embedded_default():
                table = f"> **Embedded default model.** {EMBEDDED_WARNING}\n\n{table}"
            return Markdown(table)

        handle = display(text(), display_id=True)
        shell = get_ipython()
        if shell is not None and handle is not None:
            shell.events.register("post_run_cell", lambda result: handle.update(text()))

    def headline(self, sentence: str) -> str:
        """Record the run's headline result (one line of its narrative, Markdown marks removed) for
        run.json and the index page; returns it.
        """
        # emphasis, code and heading / quote marks go; underscores stay (method names: naive_rag)
        unmarked = re.sub(r"(?m)^\s*[#>]+\s*", "", re.sub(r"[*`]+", "", sentence))
        line = " ".join(unmarked.split())
        write_text(self.run_dir / HEADLINE_FILE, line + "\n")
        return line

    def narrate(self) -> Markdown:
        """The notebook's findings, worded by its narrative (its registry entry's) from the tables
        the run saved, read back from disk: a report's prose states only what a saved table holds.
        Records the headline as `headline` does.
        """
        from IPython.display import Markdown

        narration = narrative_of(self.notebook)(read_saved_tables(self.run_dir))
        self.headline(narration.headline)
        return Markdown(narration.findings)

    def prompt_versions(self) -> list[str]:
        ledger = self.ledger.frame()
        return sorted(p for p in ledger["prompt"].unique() if p)


def in_flight_note(llm: LLMSettings) -> str:
    """How many requests the run keeps in flight, and the rate limits it honours."""
    if llm.concurrency is None:
        note = f"{llm.in_flight} (llm.concurrency null: " + (
            "the embedded server's slots)" if llm.backend == "embedded" else "one on an endpoint)"
        )
    elif llm.in_flight < llm.concurrency:
        note = f"{llm.in_flight} (llm.concurrency {llm.concurrency}; the embedded server's slots)"
    else:
        note = f"{llm.in_flight} (llm.concurrency)"
    limits = [
        f"{value:,} {what}"
        for value, what in ((llm.requests_per_minute, "requests"), (llm.tokens_per_minute, "tokens"))
        if value
    ]
    return note + (f"; at most {' and '.join(limits)} a minute" if limits else "")


def open_run(
    settings: dict[str, Any] | Settings | None = None,
    run_dir: str | Path | None = None,
    notebook: str = "interactive",
    outputs: str | Path = "outputs",
    overrides: str = "",
) -> RunContext:
    """Open a run from a notebook. papermill injects `settings` and `run_dir`; interactively both
    may be omitted (code defaults, folder `outputs/interactive/<notebook>`). `overrides` (papermill's
    `-p overrides "llm.model=gpt-4o-mini; qa.questions_per_type=5"`) sets single dotted settings
    over `settings`, with `--set`'s syntax.
    """
    # Progress bars of model loading are noise in a rendered report.
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    install_table_formatter()  # every DataFrame the notebook shows, in the kit's table style
    if overrides and isinstance(settings, Settings):
        raise ParamsError(
            f"notebook {notebook}: overrides {overrides!r} need settings as a dict, not resolved"
        )
    if not isinstance(settings, Settings):
        where = f"settings of notebook {notebook}"
        given = deep_merge(settings or {}, parse_set_overrides(split_overrides(overrides)))
        settings = validate_settings(restore_credentials(given, where), where)
    check_settings(settings, f"settings of notebook {notebook}", project_root())
    run_id = RunSpec(notebook=notebook, settings=settings).run_id
    run_dir = Path(run_dir) if run_dir else output_path(Path(outputs) / "interactive" / run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    cache = open_cache(settings.cache)
    ledger = Ledger(run_id, run_dir / "ledger.csv")
    llm = LLM(settings.llm, cache, ledger, _endpoint_resolver(settings, run_dir))
    embedder = Embedder(settings.embeddings, cache, ledger, settings.llm)
    return RunContext(settings, run_dir, run_id, notebook, ledger, cache, llm, embedder)


def secret_variables(settings: Settings) -> list[str]:
    """The environment variables holding the run's API keys and cache password, whose values no
    output may show.
    """
    return [settings.llm.api_key_env, settings.embeddings.api_key_env, settings.cache.password_env]


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version(), "embedded server": server_version()}
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
