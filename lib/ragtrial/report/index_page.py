"""`outputs/index.html`, the page of every run, and the run records it reads (`run.json`), which the
verdict's run finder shares. The runner renders it when a run starts (after its folder was cleared)
and when it ends, and the page links only the files that exist, so a re-run's page never points at
what the re-run removed.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrial.config.base import ParamsError
from ragtrial.config.notebooks import NOTEBOOKS, SWEEP_NOTEBOOK, real_evidence_notebooks
from ragtrial.locks import pid_alive
from ragtrial.report.files import write_text
from ragtrial.report.html import CONTENT_SECURITY_POLICY

# The notebook whose runs are a batch's verdict (the index page links each batch to its own).
VERDICT_NOTEBOOK = "10_verdict"


@dataclass(frozen=True)
class RunRecord:
    """One run folder's `run.json`: its content, or why it could not be read (`problem`)."""

    run_dir: Path
    record: dict[str, Any] | None
    problem: str = ""

    @property
    def readable_record(self) -> dict[str, Any]:
        """`record`, for code that holds only readable runs (an unreadable one there is a bug)."""
        if self.record is None:
            raise ValueError(f"{self.run_dir}: a run whose run.json was not read ({self.problem})")
        return self.record


def read_run_record(run_dir: Path) -> RunRecord:
    """`run_dir/run.json` as a record; a file that is not a JSON object gives a `problem` naming it
    instead of an exception, so a broken folder of someone else's stops neither the index nor the verdict.
    """
    path = run_dir / "run.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        return RunRecord(run_dir, None, f"{path}: unreadable ({err})")
    except json.JSONDecodeError as err:
        return RunRecord(run_dir, None, f"{path}: not valid JSON: {err.msg} at line {err.lineno}")
    if not isinstance(record, dict):
        return RunRecord(run_dir, None, f"{path}: not a JSON object")
    return RunRecord(run_dir, record)


def run_records(outputs: Path) -> list[RunRecord]:
    """Every run folder's record directly under `outputs`, in folder-name order."""
    return [read_run_record(path.parent) for path in sorted(Path(outputs).glob("*/run.json"))]


CANDIDATES_SHOWN = 20


def matching_run(outputs: Path, target: str, otherwise: str = "") -> str:
    """The id of the one run folder under `outputs` whose id is `target` or starts with it; a
    ParamsError naming the candidates (or the runs) else, ending with `otherwise` (what else the
    command takes) when given.
    """
    runs = sorted(p.parent.name for p in Path(outputs).glob("*/run.json"))
    matches = [target] if target in runs else [run for run in runs if run.startswith(target)]
    if len(matches) == 1:
        return matches[0]
    shown = matches or runs
    listing = ", ".join(shown[:CANDIDATES_SHOWN]) + (", ..." if len(shown) > CANDIDATES_SHOWN else "")
    problem = f"{len(matches)} runs start with it" if matches else "no run id starts with it"
    raise ParamsError(
        f"{target}: {problem} in {outputs} ({'candidates' if matches else 'runs'}: {listing or 'none'}); "
        f"give more of the run id{otherwise}"
    )


def batch_file(record: dict[str, Any]) -> str:
    """The batch file a run was started from ("" for a run without one, e.g. one run before batches were
    recorded).
    """
    return str((record.get("batch") or {}).get("file", ""))


def shown_status(run: dict) -> str:
    """The status the index shows: a `running` record whose process is gone was killed (kill -9,
    power loss) before it could say so, so it shows as interrupted; the next run resumes it.
    """
    status = run.get("status", "?")
    if status == "running" and not pid_alive(run.get("pid")):
        return "interrupted"
    return status


def status_counts(statuses: Iterable[str]) -> str:
    """How many runs have each status, by status name: "2 completed, 1 failed" (the index page's
    summary, `ragtrial run`'s closing table and `ragtrial list`).
    """
    counts = Counter(statuses)
    return ", ".join(f"{counts[status]} {status}" for status in sorted(counts))


def _text(value: object) -> str:
    return html.escape(str(value))


def _cell(value: object, css: str = "") -> str:
    return f'<td class="{css}">{_text(value)}</td>' if css else f"<td>{_text(value)}</td>"


def _link(run_dir: Path, name: str, text: str = "") -> str:
    """A link to a file of the run folder, or "" when the file is not there (a run being re-run)."""
    if not (run_dir / name).is_file():
        return ""
    target = html.escape(f"{run_dir.name}/{name}", quote=True)
    return f'<a href="{target}">{_text(text or name)}</a>'


def _status_cell(status: str) -> str:
    return f'<td class="{html.escape(status, quote=True)}">{_text(status)}</td>'


def _earlier_attempts(run: dict) -> str:
    """What attempts that did not complete paid, e.g. "1 killed: 12 live calls"."""
    return "; ".join(
        f"{a['attempt']} {a['status']}: {a['ledger'].get('llm_calls_live', 0)} live calls"
        for a in run.get("attempts", [])
    )


def data_set_label(settings: dict[str, Any]) -> str:
    """The data set as the verdict rows name it: the loader and its folder, or the generated size."""
    data = settings.get("data", {})
    where = data.get("path") or data.get("size", "")
    return f"{data.get('dataset', '')} ({where})" if where else str(data.get("dataset", ""))


def _model_cell(settings: dict[str, Any]) -> str:
    """The model asked for, marked when it is the embedded default (a smoke-test model)."""
    llm = settings.get("llm", {})
    marker = (
        '<span class="embedded" title="the embedded default model: fine for checking the kit, not for '
        'research-grade numbers">embedded</span> '
        if llm.get("backend") == "embedded"
        else ""
    )
    return f'<td class="model">{marker}{_text(llm.get("model", ""))}</td>'


ERROR_SHOWN_CHARS = 160


def _error_cell(run: RunRecord, status: str) -> str:
    """A failed run's reason: its start in the cell, the whole on hover, and the traceback's file."""
    error = str(run.readable_record.get("error", "")) if status == "failed" else ""
    if not error:
        return "<td></td>"
    shown = error if len(error) <= ERROR_SHOWN_CHARS else error[: ERROR_SHOWN_CHARS - 1] + "…"
    traceback = _link(run.run_dir, "error.txt")
    return (
        f'<td class="error" title="{html.escape(error, quote=True)}">{_text(shown)}'
        + (f" ({traceback})" if traceback else "")
        + "</td>"
    )


def _question(notebook: str) -> str:
    return NOTEBOOKS.get(notebook).question if notebook in NOTEBOOKS else ""


RUN_COLUMNS = [
    "run",
    "question it answers",
    "label",
    "status",
    "headline result",
    "error",
    "LLM",
    "data",
    "started (UTC)",
    "seconds",
    "live calls",
    "cached calls",
    "prompt tokens",
    "completion tokens",
    "failures",
    "earlier attempts",
    "files",
]


def _run_row(run: RunRecord) -> str:
    record, run_dir = run.readable_record, run.run_dir
    ledger, settings = record.get("ledger", {}), record.get("settings", {})
    status = shown_status(record)
    files = " ".join(
        link
        for name in ("report.html", "run.json", "notebook.ipynb", "ledger.csv")
        if (link := _link(run_dir, name))
    )
    cells = [
        _cell(run_dir.name),
        _cell(_question(str(record.get("notebook", ""))), "text"),
        _cell(record.get("label", "")),
        _status_cell(status),
        _cell(record.get("headline", ""), "text"),
        _error_cell(run, status),
        _model_cell(settings),
        _cell(data_set_label(settings)),
        _cell(record.get("started_at", "")),
        _cell(record.get("duration_s", "")),
        _cell(ledger.get("llm_calls_live", "")),
        _cell(ledger.get("llm_calls_cached", "")),
        _cell(ledger.get("prompt_tokens", "")),
        _cell(ledger.get("completion_tokens", "")),
        _cell(ledger.get("failures", "")),
        _cell(_earlier_attempts(record)),
        f"<td>{files}</td>",
    ]
    return "<tr>" + "".join(cells) + "</tr>"


def _table(columns: list[str], rows: list[str]) -> str:
    header = "".join(f"<th>{_text(name)}</th>" for name in columns)
    return f'<div class="scroll"><table><tr>{header}</tr>{"".join(rows)}</table></div>'


def _verdict_line(runs: list[RunRecord]) -> str:
    """The batch's latest-started verdict run, linked to its report when it has one."""
    verdicts = [r for r in runs if r.readable_record.get("notebook") == VERDICT_NOTEBOOK]
    if not verdicts:
        return f"<p>No verdict run in this batch yet (notebook <code>{VERDICT_NOTEBOOK}</code>).</p>"
    latest = max(verdicts, key=lambda r: str(r.readable_record.get("started_at", "")))
    status = shown_status(latest.readable_record)
    report = _link(latest.run_dir, "report.html", "the verdict's report")
    where = report or "no report yet"
    headline = latest.readable_record.get("headline", "")
    return (
        f'<p class="verdict">Verdict: {where} (run <code>{_text(latest.run_dir.name)}</code>, '
        f'<span class="{html.escape(status, quote=True)}">{_text(status)}</span>): is the graph worth its '
        "indexing bill on this batch's data sets and model, per question type."
        + (f"<br>{_text(headline)}" if headline else "")
        + "</p>"
    )


def _sweep_lines(runs: list[RunRecord]) -> str:
    """One line per sweep report of the batch (a grid's, `config.batch.sweep_spec`), linked to its
    report when it has one.
    """
    lines = []
    for sweep in (r for r in runs if r.readable_record.get("notebook") == SWEEP_NOTEBOOK):
        record = sweep.readable_record
        status = shown_status(record)
        report = _link(sweep.run_dir, "report.html", "the sweep report") or "no report yet"
        headline = record.get("headline", "")
        lines.append(
            f'<p class="sweep">Sweep: {report} (run <code>{_text(sweep.run_dir.name)}</code>, '
            f'<span class="{html.escape(status, quote=True)}">{_text(status)}</span>): '
            f"{_text(record.get('label', ''))}, every point against the first on the same questions."
            + (f"<br>{_text(headline)}" if headline else "")
            + "</p>"
        )
    return "".join(lines)


def _batch_order(runs: list[RunRecord]) -> list[RunRecord]:
    """The batch's runs in the order of its latest-started run's batch record, then the others by name."""
    latest = max(runs, key=lambda r: str(r.readable_record.get("started_at", "")))
    order = {
        run_id: i for i, run_id in enumerate((latest.readable_record.get("batch") or {}).get("run_ids", []))
    }
    return sorted(runs, key=lambda r: (order.get(r.run_dir.name, len(order)), r.run_dir.name))


def _batch_section(batch: str, runs: list[RunRecord]) -> str:
    if batch:
        title = f"Batch <code>{_text(batch)}</code>"
        verdict = _verdict_line(runs) + _sweep_lines(_batch_order(runs))
    else:
        title, verdict = "Runs without a batch file", ""
    ordered = _batch_order(runs)
    real = [r for r in ordered if r.readable_record.get("notebook") in real_evidence_notebooks()]
    if not real:
        rows = [_run_row(r) for r in ordered]
        return f"<section><h2>{title}</h2>{verdict}{_table(RUN_COLUMNS, rows)}</section>"
    others = [_run_row(r) for r in ordered if r not in real]
    return (
        f"<section><h2>{title}</h2>{verdict}<h3>Real evidence (LLM-free)</h3><p>Retrieval on real "
        "benchmarks' gold evidence, no model call: these headlines are measurements.</p>"
        f"{_table(RUN_COLUMNS, [_run_row(r) for r in real])}"
        + (f"<h3>The other runs</h3>{_table(RUN_COLUMNS, others)}" if others else "")
        + "</section>"
    )


def render_index(outputs: Path) -> Path:
    """`outputs/index.html`: a section per batch file with its verdict, its sweep reports and its runs
    (the question each answers, status, headline result, error, model, cost and links to the files
    that exist). A
    `run.json` that cannot be read is a row saying so, not a failed page.
    """
    records = run_records(outputs)
    readable = [r for r in records if r.record is not None]
    unreadable = [r for r in records if r.record is None]
    by_batch: dict[str, list[RunRecord]] = {}
    for run in readable:
        by_batch.setdefault(batch_file(run.readable_record), []).append(run)
    sections = [_batch_section(b, by_batch[b]) for b in sorted(by_batch, key=lambda b: (b == "", b))]
    if unreadable:
        rows = [
            f'<tr>{_cell(r.run_dir.name)}<td class="failed">unreadable</td>{_cell(r.problem)}</tr>'
            for r in unreadable
        ]
        sections.append(
            f"<section><h2>Unreadable run records</h2>{_table(['run', 'status', 'problem'], rows)}</section>"
        )
    counts = status_counts(shown_status(r.readable_record) for r in readable)
    summary = f"{len(records)} run{'' if len(records) == 1 else 's'}: {counts}" + (
        f", {len(unreadable)} unreadable" if unreadable else ""
    )
    page = f"""<!doctype html><html><head>{CONTENT_SECURITY_POLICY}
<meta charset="utf-8"><title>ragtrial runs</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1400px}}.scroll{{overflow-x:auto}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;font-size:90%;
vertical-align:top}}th{{background:#f4f4f4;text-align:left}}td:first-child,td.model{{white-space:nowrap}}
td.text{{min-width:14em;max-width:28em}}td.error{{min-width:14em;
max-width:28em;color:#900}}.failed{{background:#fdd}}.completed{{background:#dfd}}.running{{background:#ffd}}
.interrupted,.locked{{background:#fed}}.embedded{{background:#fe9;border-radius:3px;padding:0 3px;
font-size:85%}}</style></head><body>
<h1>ragtrial runs</h1><p>{_text(summary) if records else "No run yet."}</p>
<p>One section per batch file, with its verdict. Each row is one notebook run; its <code>run.json</code>
holds the resolved parameters, git commit, package versions and the cost ledger summary. Token totals
include calls replayed from the cache. Calls and tokens are the last attempt's; "earlier attempts" lists
what attempts that did not complete paid (their rows are in the run's <code>ledger.parquet</code>). A run
shown as running is being executed now; one that stopped without saying so shows as interrupted (run the
batch again to resume it from the cache).</p>
{"".join(sections)}
</body></html>
"""
    return write_text(outputs / "index.html", page)
