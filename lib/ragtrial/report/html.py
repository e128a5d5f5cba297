"""Rendered reports: each executed notebook as HTML (code hidden by default) and the run index."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

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
        status = run.get("status", "?")
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
            "files",
        ]
    )
    page = f"""<!doctype html><html><head>{CONTENT_SECURITY_POLICY}
<meta charset="utf-8"><title>ragtrial runs</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;font-size:90%}}.failed{{background:#fdd}}
.completed{{background:#dfd}}.running{{background:#ffd}}</style></head><body>
<h1>ragtrial runs</h1><p>Each row is one notebook run; its <code>run.json</code> holds the resolved
parameters, git commit, package versions and the cost ledger summary. Token totals include calls
replayed from the cache.</p><table><tr>{header}</tr>{"".join(rows)}</table></body></html>
"""
    return write_text(outputs / "index.html", page)
