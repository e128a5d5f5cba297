"""A report as a reader's browser shows it: a notebook executed in a real kernel displays the tables a
run shows (a wide one, long text, missing values, counts stored as floats, a pivot, a grouped header)
with the kit's formatter installed, is rendered with the kit's template and screenshotted in headless
Chromium. The page names its notebook and run, loads nothing from elsewhere, hides no column or row
and wraps its wide tables in a scroll box.
"""

from __future__ import annotations

import re
import subprocess
import sys

import nbformat
import pytest
from conftest import PROJECT_ROOT
from nbclient import NotebookClient

from ragtrial.report.html import render_report
from ragtrial.report.screenshots import screenshot

# what a notebook does before its first table: open its run (which installs the kit's formatter)
SETUP = (
    "import numpy as np\nimport pandas as pd\nfrom IPython.display import display\n"
    "from ragtrial.report.tables import show_table\nfrom ragtrial.runner.context import open_run\n"
    "ctx = open_run({{'cache': {{'url': 'sqlite:///' + {cache!r}}}}}, {run_dir!r}, notebook='notebook')\n"
    "assert pd.get_option('display.max_columns') is None and pd.get_option('display.max_rows') is None"
)
CELLS = [
    # 04's answers table was "7 rows × 27 columns" with the accuracy columns hidden
    "wide = pd.DataFrame({f'measure_{i:02d}': np.linspace(0, 1, 7) + i for i in range(26)})\n"
    "wide['accuracy_hidden_by_pandas'] = np.linspace(0.1, 0.9, 7)\n"
    "wide",
    "display(pd.DataFrame({'method': ['vector', 'graph_local'], 'calls': [575.0, 1234.0],\n"
    "    'latency_s': [0.123456789, 2.5], 'mean_diff': [-0.0000000001, 0.25], 'failure': [None, np.nan]}))",
    "pd.DataFrame({'verdict': ['The graph method wins.\\nIt wins on global questions only, ' * 8],\n"
    "    'method': ['graph_global']})",
    "pd.DataFrame({'threshold': [0.5, 0.5, 0.8, 0.8], 'method': ['a', 'b', 'a', 'b'],\n"
    "    'mean': [1.0, 2.5, np.nan, 3.0]}).pivot(index='threshold', columns='method', values='mean')",
    "pd.Series({'precision': 0.5, 'recall': 0.25}, name='BERTScore')",
    "show_table(pd.DataFrame({'question_id': range(100), 'tokens': [1500.0] * 100}), rows=20,"
    " saved_as='answers')",
    "pd.DataFrame({'styled_count': [3.0]}).style.format(precision=4)",
]


@pytest.fixture(scope="module")
def report(tmp_path_factory, notebook_kernels):
    """The run folder of the executed notebook, its report rendered."""
    folder = tmp_path_factory.mktemp("outputs") / "notebook-0123456789"
    folder.mkdir()
    notebook = nbformat.v4.new_notebook()
    setup = SETUP.format(cache=str(folder / "cache.sqlite"), run_dir=str(folder))
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in [setup, *CELLS]]
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    nbformat.write(notebook, folder / "notebook.ipynb")
    render_report(folder / "notebook.ipynb", folder / "report.html")
    return folder


def test_a_reports_tables_hide_nothing_and_its_page_needs_nothing_but_itself(report):
    page = (report / "report.html").read_text()
    assert f"<title>notebook · run {report.name}</title>" in page
    assert not re.search(r"rows\s*×", page) and "columns</p>" not in page  # pandas' truncation footer
    assert re.search(r"accuracy_<wbr/?>hidden_<wbr/?>by_<wbr/?>pandas", page)  # the 27th column
    assert "…" not in page.split("</style>")[-1]  # no cell cut short
    assert "<th></th>" not in page  # no RangeIndex column
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page) and "https://cdn" not in page
    assert "<script" not in page
    assert page.count('<div class="rt-table') == 7 and ".rt-table" in page and "overflow-x: auto" in page
    body = page.split("</style>")[-1]
    assert ">575<" in body and ">1,234<" in body and "575.0" not in body  # counts as integers
    assert ">0.12<" in body and ">2.50<" in body and "0.123456" not in body  # seconds, two decimals
    assert ">0.00<" in body and "-0.0" not in body  # rounding noise is 0, never -0
    assert "NaN" not in body and "None" not in body and 'title="no value">—' in body
    assert re.search(r"wins.<br/?>It wins", body)  # the verdict's line break, and the text in full
    assert body.count("It wins on global questions only") == 8
    assert 'rt-corner" colspan="1">method</th>' in body and 'rt-corner">threshold</th>' in body
    assert ">BERTScore<" in body and ">precision<" in body
    assert '20 of 100 rows; the full table is <a href="tables/answers.csv">tables/answers.csv</a>.' in body
    assert re.search(r"styled_<wbr/?>count</th></tr></thead><tbody><tr><td class=.rt-num.>3<", body)


def test_chromium_draws_the_report_and_the_script_draws_every_report(report, chromium_browser, tmp_path):
    png = screenshot(report / "report.html", tmp_path / "report.png", browser=chromium_browser)
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1400, 2000)
    assert len(data) > 40_000  # a page of tables, not a blank one (a blank 1400x2000 PNG is ~10 kB)
    done = subprocess.run(
        [
            sys.executable,
            str(PROJECT_ROOT / "bench" / "report_screenshots.py"),
            str(report.parent),
            "--to",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / f"{report.name}.png").stat().st_size > 40_000
    assert done.stdout.strip().endswith(f"1 of 1 pages in {tmp_path}")
