"""Rendered reports: each executed notebook as HTML (code hidden by default), a page that needs
nothing but itself: the kit's template (templates/ragtrial, nbconvert's lab page without its
scripts, with the kit's table style) and a title naming the notebook and the run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ragtrial.report.files import write_text

TEMPLATES = Path(__file__).parent / "templates"
TEMPLATE = "ragtrial"

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


def report_title(notebook: Any, notebook_path: Path) -> str:
    """The page title `<notebook> · run <run id>`: from papermill's metadata of an executed notebook
    (the notebook it ran, the run folder it wrote), else from the notebook's file and folder names.
    """
    papermill = notebook.metadata.get("papermill", {})
    name = Path(papermill.get("input_path") or notebook_path).stem
    run_dir = (papermill.get("parameters") or {}).get("run_dir") or Path(notebook_path).resolve().parent
    return f"{name} · run {Path(run_dir).name}"


def render_report(
    notebook_path: Path, html_path: Path, show_code: bool = False, title: str | None = None
) -> Path:
    """`notebook_path` as a self-contained HTML page at `html_path`, titled `title` (by default
    `report_title`).
    """
    import nbformat
    from nbconvert import HTMLExporter

    notebook = nbformat.read(notebook_path, as_version=4)
    notebook.metadata["title"] = title or report_title(notebook, notebook_path)
    exporter = HTMLExporter(
        template_name=TEMPLATE,
        extra_template_basedirs=[str(TEMPLATES)],
        exclude_input=not show_code,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    body, _ = exporter.from_notebook_node(notebook)
    return write_text(html_path, with_content_security_policy(body))
