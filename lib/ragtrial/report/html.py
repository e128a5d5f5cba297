"""Rendered reports: each executed notebook as HTML (code hidden by default)."""

from __future__ import annotations

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
