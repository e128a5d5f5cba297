"""Model- and endpoint-provided text is inert in a report: escaped before it enters Markdown, and the
rendered report lets no script run should anything slip through.
"""

import html
import html.parser
import json

import nbformat
import pytest
from hostile import INJECTION, INJECTIONS, live_elements
from nbconvert.filters.markdown_mistune import markdown2html_mistune

from ragtrial.report.html import CONTENT_SECURITY_POLICY, render_report
from ragtrial.report.index_page import VERDICT_NOTEBOOK, render_index
from ragtrial.report.markdown import escape_markdown, model_markdown, table_cell

pytestmark = pytest.mark.fault


def text_of(rendered: str) -> str:
    """What a reader sees of rendered HTML."""
    seen = []
    parser = html.parser.HTMLParser()
    parser.handle_data = seen.append
    parser.feed(rendered)
    return "".join(seen)


def test_the_live_element_finder_finds_what_it_looks_for():
    assert len(live_elements(f"<p>{INJECTION}</p>")) == 2
    assert live_elements('<p><a href="javascript:alert(3)">x</a></p>') == ["<a href='javascript:alert(3)'>"]
    assert live_elements("<p>&lt;img src=x onerror=alert(1)&gt;</p>") == []
    assert live_elements(markdown2html_mistune(INJECTION)) != []  # what unescaped model text becomes


def test_escaped_text_renders_as_written_and_starts_no_element():
    hostile = f"# not a heading\n{INJECTION} *a* `b` | c & d &lt; ![i](http://t/p.png) $x$"
    rendered = markdown2html_mistune(escape_markdown(hostile))
    assert live_elements(rendered) == [] and "<img" not in rendered and "<a " not in rendered
    assert text_of(rendered).strip() == hostile


def test_model_markdown_keeps_its_formatting_but_no_html_link_or_image():
    report = f"# Title\n\n{INJECTION}\n\n- **finding** ![i](http://t/p.png)"
    rendered = markdown2html_mistune(model_markdown(report))
    assert live_elements(rendered) == [] and "<img" not in rendered and "<script" not in rendered
    assert "<h4" in rendered and "<strong>finding</strong>" in rendered
    assert all(text in text_of(rendered) for text in INJECTIONS)


def test_a_table_cell_stays_one_cell():
    row = f"| what | {table_cell('a | b' + chr(10) + INJECTION)} |"
    rendered = markdown2html_mistune(f"| what | value |\n|---|---|\n{row}")
    assert rendered.count("<td>") == 2 and live_elements(rendered) == []


def test_reports_and_the_index_carry_a_policy_that_lets_no_script_run(tmp_path):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# Report")]
    nbformat.write(notebook, tmp_path / "notebook.ipynb")
    page = render_report(tmp_path / "notebook.ipynb", tmp_path / "report.html").read_text()
    index = render_index(tmp_path).read_text()
    for written in (page, index):
        head = written.index("<head>") + len("<head>")
        assert written[head:].lstrip().startswith(CONTENT_SECURITY_POLICY)
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY and "script-src" not in CONTENT_SECURITY_POLICY


def test_the_index_pages_verdict_and_batch_cells_start_no_element(tmp_path):
    """run.json values reach the index page only escaped: a batch file name, label, model or status
    holding markup shows as text in both the verdicts and the runs table.
    """
    run_dir = tmp_path / f"{VERDICT_NOTEBOOK}-x"
    run_dir.mkdir()
    (run_dir / "report.html").write_text("<html></html>")
    record = {
        "notebook": VERDICT_NOTEBOOK,
        "status": INJECTION,
        "label": INJECTION,
        "settings": {"llm": {"model": INJECTION}, "data": {"dataset": INJECTION, "path": INJECTION}},
        "batch": {"file": INJECTION, "run_ids": []},
    }
    (run_dir / "run.json").write_text(json.dumps(record))
    page = render_index(tmp_path).read_text()
    assert live_elements(page) == [] and page.count(html.escape(INJECTIONS[0])) >= 5
