"""`outputs/index.html`, the page of every run, and the run records it reads (`run.json`), which the
verdict's run finder shares.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def batch_file(record: dict[str, Any]) -> str:
    """The batch file a run was started from ("" for a run without one, e.g. one run before batches were
    recorded).
    """
    return str((record.get("batch") or {}).get("file", ""))


def _cell(value: object) -> str:
    return f"<td>{html.escape(str(value))}</td>"


def shown_status(run: dict) -> str:
    """The status the index shows: a `running` record whose process is gone was killed (kill -9,
    power loss) before it could say so, so it shows as interrupted; the next run resumes it.
    """
    status = run.get("status", "?")
    if status == "running" and not pid_alive(run.get("pid")):
        return "interrupted"
    return status


def _earlier_attempts(run: dict) -> str:
    """What attempts that did not complete paid, e.g. "1 killed: 12 live calls"."""
    return "; ".join(
        f"{a['attempt']} {a['status']}: {a['ledger'].get('llm_calls_live', 0)} live calls"
        for a in run.get("attempts", [])
    )


def _data_set(settings: dict[str, Any]) -> str:
    """The data set as the verdict rows name it: the loader and its folder, or the generated size."""
    data = settings.get("data", {})
    where = data.get("path") or data.get("size", "")
    return f"{data.get('dataset', '')} ({where})" if where else str(data.get("dataset", ""))


def _link(run_id: str, name: str) -> str:
    target = html.escape(f"{run_id}/{name}", quote=True)
    return f'<a href="{target}">{html.escape(name)}</a>'


def _verdict_rows(runs: list[RunRecord]) -> list[str]:
    """One row per batch file with a verdict run: the latest-started one, linked to its report."""
    latest: dict[str, RunRecord] = {}
    for run in runs:
        record = run.record
        if record is None or record.get("notebook") != VERDICT_NOTEBOOK or not batch_file(record):
            continue
        held = latest.get(batch_file(record))
        if held is None or str(record.get("started_at", "")) > str(held.record.get("started_at", "")):
            latest[batch_file(record)] = run
    rows = []
    for batch, run in sorted(latest.items()):
        record, run_id = run.record, run.run_dir.name
        settings, status = record.get("settings", {}), shown_status(record)
        report = _link(run_id, "report.html") if (run.run_dir / "report.html").exists() else "no report yet"
        rows.append(
            "<tr>"
            + "".join(
                [
                    _cell(batch),
                    _cell(_data_set(settings)),
                    _cell(settings.get("llm", {}).get("model", "")),
                    f'<td class="{html.escape(status, quote=True)}">{html.escape(status)}</td>',
                    _cell(run_id),
                    f"<td>{report}</td>",
                ]
            )
            + "</tr>"
        )
    return rows


def _run_row(run: RunRecord) -> str:
    run_id = run.run_dir.name
    if run.record is None:
        problem = f'<td class="failed">unreadable</td><td colspan="13">{html.escape(run.problem)}</td>'
        return f"<tr>{_cell(run_id)}{problem}</tr>"
    record = run.record
    ledger, settings = record.get("ledger", {}), record.get("settings", {})
    links = " ".join(
        _link(run_id, name)
        for name in ("report.html", "run.json", "notebook.ipynb", "ledger.csv")
        if (run.run_dir / name).exists()
    )
    status = shown_status(record)
    return (
        "<tr>"
        + "".join(
            [
                _cell(run_id),
                _cell(record.get("label", "")),
                _cell(batch_file(record)),
                f'<td class="{html.escape(status, quote=True)}">{html.escape(status)}</td>',
                _cell(record.get("started_at", "")),
                _cell(record.get("duration_s", "")),
                _cell(settings.get("llm", {}).get("model", "")),
                _cell(settings.get("data", {}).get("dataset", "")),
                _cell(ledger.get("llm_calls_live", "")),
                _cell(ledger.get("llm_calls_cached", "")),
                _cell(ledger.get("prompt_tokens", "")),
                _cell(ledger.get("completion_tokens", "")),
                _cell(ledger.get("failures", "")),
                _cell(_earlier_attempts(record)),
                f"<td>{links}</td>",
            ]
        )
        + "</tr>"
    )


def _header(names: list[str]) -> str:
    return "".join(f"<th>{html.escape(name)}</th>" for name in names)


def render_index(outputs: Path) -> Path:
    """`outputs/index.html`: each batch's verdict, then every run with its batch, status, key parameters,
    cost and links. A `run.json` that cannot be read is a row saying so, not a failed page.
    """
    runs = run_records(outputs)
    verdict_header = _header(["batch", "data set", "model", "status", "verdict run", "report"])
    verdicts = _verdict_rows(runs)
    verdict_table = (
        f"<table><tr>{verdict_header}</tr>{''.join(verdicts)}</table>"
        if verdicts
        else f"<p>No batch has a verdict run yet (notebook <code>{VERDICT_NOTEBOOK}</code>).</p>"
    )
    header = _header(
        [
            "run",
            "label",
            "batch",
            "status",
            "started (UTC)",
            "seconds",
            "LLM",
            "data",
            "live calls",
            "cached calls",
            "prompt tokens",
            "completion tokens",
            "failures",
            "earlier attempts",
            "files",
        ]
    )
    page = f"""<!doctype html><html><head>{CONTENT_SECURITY_POLICY}
<meta charset="utf-8"><title>ragtrial runs</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;font-size:90%}}.failed{{background:#fdd}}
.completed{{background:#dfd}}.running{{background:#ffd}}.interrupted{{background:#fed}}</style></head><body>
<h1>ragtrial runs</h1><h2>Verdicts</h2><p>Per batch file, its latest verdict run: is the graph worth its
indexing bill on that batch's data set and model, per question type.</p>{verdict_table}
<h2>Runs</h2><p>Each row is one notebook run; its <code>run.json</code> holds the resolved
parameters, git commit, package versions and the cost ledger summary. Token totals include calls
replayed from the cache. Calls and tokens are the last attempt's; "earlier attempts" lists what
attempts that did not complete paid (their rows are in the run's
<code>ledger.parquet</code>).</p><table><tr>{header}</tr>{"".join(_run_row(run) for run in runs)}</table>
</body></html>
"""
    return write_text(outputs / "index.html", page)
