"""Rendered reports: each executed notebook as HTML (code hidden by default) and the run index."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from ragtrial.locks import pid_alive
from ragtrial.report.files import write_text

# A report is static (tables, PNG plots, text), so the browser may run no script of it at all and load
# nothing from elsewhere: should model text ever slip past the escaping at its source, an injected
# element stays inert. (nbconvert's own `sanitize_html` escapes the tables' and headings' tags too.)
CONTENT_SECURITY_POLICY = (
    '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
    "style-src 'unsafe-inline'; font-src data:; form-action 'none'; base-uri 'none'\">"
)


def with_content_security_policy(page: str) -> str:
    """`page` with the policy as the first element of its head, so it governs everything after it."""
    head = re.search(r"<head[^>]*>", page, flags=re.I)
    if head is None:
        raise ValueError("rendered report has no <head> to carry its content security policy")
    return page[: head.end()] + CONTENT_SECURITY_POLICY + page[head.end() :]


def render_report(notebook_path: Path, html_path: Path, show_code: bool = False) -> Path:
    import nbformat
    from nbconvert import HTMLExporter

    notebook = nbformat.read(notebook_path, as_version=4)
    exporter = HTMLExporter(
        exclude_input=not show_code, exclude_input_prompt=True, exclude_output_prompt=True
    )
    body, _ = exporter.from_notebook_node(notebook)
    return write_text(html_path, with_content_security_policy(body))


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


def render_index(outputs: Path) -> Path:
    """`outputs/index.html`: every run with its status, key parameters, cost and links."""
    rows = []
    for run_json in sorted(outputs.glob("*/run.json")):
        run = json.loads(run_json.read_text())
        ledger, settings = run.get("ledger", {}), run.get("settings", {})
        run_id = run_json.parent.name
        links = " ".join(
            f'<a href="{run_id}/{name}">{name}</a>'
            for name in ("report.html", "run.json", "notebook.ipynb", "ledger.csv")
            if (run_json.parent / name).exists()
        )
        status = shown_status(run)
        rows.append(
            "<tr>"
            + "".join(
                [
                    _cell(run_id),
                    _cell(run.get("label", "")),
                    f'<td class="{status}">{html.escape(status)}</td>',
                    _cell(run.get("started_at", "")),
                    _cell(run.get("duration_s", "")),
                    _cell(settings.get("llm", {}).get("model", "")),
                    _cell(settings.get("data", {}).get("dataset", "")),
                    _cell(ledger.get("llm_calls_live", "")),
                    _cell(ledger.get("llm_calls_cached", "")),
                    _cell(ledger.get("prompt_tokens", "")),
                    _cell(ledger.get("completion_tokens", "")),
                    _cell(ledger.get("failures", "")),
                    _cell(_earlier_attempts(run)),
                    f"<td>{links}</td>",
                ]
            )
            + "</tr>"
        )
    header = "".join(
        f"<th>{h}</th>"
        for h in [
            "run",
            "label",
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
<h1>ragtrial runs</h1><p>Each row is one notebook run; its <code>run.json</code> holds the resolved
parameters, git commit, package versions and the cost ledger summary. Token totals include calls
replayed from the cache. Calls and tokens are the last attempt's; "earlier attempts" lists what
attempts that did not complete paid (their rows are in the run's
<code>ledger.parquet</code>).</p><table><tr>{header}</tr>{"".join(rows)}</table></body></html>
"""
    return write_text(outputs / "index.html", page)
