"""The index page (`report.index_page`): a section per batch file with its verdict and its runs, each
run with its notebook's question, headline, status, error and the links to the files that exist; on
output folders of hand-written run.json files.
"""

from __future__ import annotations

import html
import json
import os
import re

from ragtrial.config.notebooks import NOTEBOOKS, SWEEP_NOTEBOOK
from ragtrial.report.index_page import VERDICT_NOTEBOOK, render_index

QA, BACKEND = "04_rag_vs_graphrag_qa", "00_backend_check"
DEFAULT = {"file": "params/default.yaml", "run_ids": ["00-ours", "04-ours", "10-new"]}


def write_run(outputs, run_id, notebook, *, files=(), **record):
    run_dir = outputs / run_id
    run_dir.mkdir(parents=True)
    record = {
        "run_id": run_id,
        "notebook": notebook,
        "label": "",
        "status": "completed",
        "settings": {
            "llm": {"backend": "openai_compatible", "model": "gpt-x"},
            "data": {"dataset": "generated"},
        },
        "started_at": "2025-01-01T10:00:00+00:00",
        "batch": DEFAULT,
        **record,
    }
    (run_dir / "run.json").write_text(json.dumps(record))
    for name in files:
        (run_dir / name).write_text("x")
    return run_dir


def section(page: str, title: str) -> str:
    start = page.index(f"<h2>{title}</h2>")
    end = page.find("<section>", start)
    return page[start : end if end > 0 else len(page)]


def row_of(page: str, run_id: str) -> str:
    [row] = re.findall(rf"<tr><td>{re.escape(run_id)}</td>.*?</tr>", page)
    return row


def test_each_batch_has_its_section_with_its_latest_verdict_and_its_runs(tmp_path):
    write_run(tmp_path, "04-ours", QA, files=("report.html",))
    write_run(tmp_path, "10-old", VERDICT_NOTEBOOK, files=("report.html",))
    write_run(
        tmp_path, "10-new", VERDICT_NOTEBOOK, started_at="2025-02-01T10:00:00+00:00", files=("report.html",)
    )
    write_run(tmp_path, "00-ours", BACKEND)
    write_run(tmp_path, "10-paper", VERDICT_NOTEBOOK, batch={"file": "params/paper_<qa>.yaml", "run_ids": []})
    write_run(tmp_path, "00-alone", BACKEND, batch=None)
    (tmp_path / "00-broken").mkdir()
    (tmp_path / "00-broken" / "run.json").write_text("{")
    page = render_index(tmp_path).read_text()
    default = section(page, "Batch <code>params/default.yaml</code>")
    assert 'Verdict: <a href="10-new/report.html">' in default and "10-paper" not in default
    # the batch's runs in its order, then the others; the older verdict is listed, not linked as the verdict
    assert [default.index(f"<td>{r}</td>") for r in ("00-ours", "04-ours", "10-new", "10-old")] == sorted(
        default.index(f"<td>{r}</td>") for r in ("00-ours", "04-ours", "10-new", "10-old")
    )
    paper = section(page, "Batch <code>params/paper_&lt;qa&gt;.yaml</code>")
    assert "Verdict: no report yet (run <code>10-paper</code>" in paper
    alone = section(page, "Runs without a batch file")
    assert "<td>00-alone</td>" in alone and "Verdict" not in alone
    unreadable = section(page, "Unreadable run records")
    assert '<td>00-broken</td><td class="failed">unreadable</td>' in unreadable
    assert f"{tmp_path / '00-broken' / 'run.json'}: not valid JSON" in unreadable
    assert page.count('<div class="scroll"><table>') == 4  # wide tables scroll on their own


def test_a_run_shows_its_question_headline_model_and_only_the_files_that_exist(tmp_path):
    write_run(
        tmp_path,
        "04-ours",
        QA,
        label="gpt-x run",
        headline="Graph walk beats hybrid on multi-hop questions by 12 points.",
        files=("ledger.csv", "notebook.ipynb"),  # no report.html (yet): not linked
    )
    embedded = {
        "llm": {"backend": "embedded", "model": "gemma-3-270m-q4_k_m"},
        "data": {"dataset": "generated"},
    }
    write_run(tmp_path, "00-ours", BACKEND, settings=embedded)
    page = render_index(tmp_path).read_text()
    row = row_of(page, "04-ours")
    assert html.escape(NOTEBOOKS.get(QA).question) in row and "<td>gpt-x run</td>" in row
    assert "Graph walk beats hybrid on multi-hop questions by 12 points." in row
    assert '<a href="04-ours/run.json">' in row and '<a href="04-ours/notebook.ipynb">' in row
    assert '<a href="04-ours/ledger.csv">' in row and "report.html" not in row
    assert '<td class="model">gpt-x</td>' in row and 'class="embedded"' not in row
    assert '<span class="embedded"' in row_of(page, "00-ours") and "gemma-3-270m-q4_k_m" in row_of(
        page, "00-ours"
    )


def test_running_interrupted_and_failed_runs_say_so(tmp_path):
    gone = 2**22 + 12345  # above the default pid_max: no process has it
    write_run(tmp_path, "04-live", QA, status="running", pid=os.getpid())
    write_run(tmp_path, "04-killed", QA, status="running", pid=gone)
    reason = "DataError: file corpus/x: data set folder not found (notebook cell In [3]) " + "and more " * 40
    write_run(tmp_path, "04-failed", QA, status="failed", error=reason.strip(), files=("error.txt",))
    write_run(tmp_path, "00-failed", BACKEND, status="failed", error="ValueError: short")  # no error.txt
    page = render_index(tmp_path).read_text()
    assert '<td class="running">running</td>' in row_of(page, "04-live")
    assert '<td class="interrupted">interrupted</td>' in row_of(page, "04-killed")
    failed = row_of(page, "04-failed")
    assert '<td class="failed">failed</td>' in failed
    [cell] = re.findall(r'<td class="error" title="([^"]*)">(.*?)</td>', failed)
    assert html.unescape(cell[0]) == reason.strip()  # the whole reason on hover
    assert cell[1].startswith("DataError: file corpus/x: data set folder not found") and "…" in cell[1]
    assert '<a href="04-failed/error.txt">error.txt</a>' in cell[1]
    assert '<td class="error" title="ValueError: short">ValueError: short</td>' in row_of(page, "00-failed")
    assert "2 failed, 1 interrupted, 1 running" in page


def test_a_batch_lists_its_real_evidence_first_and_its_verdict_headline(tmp_path):
    batch = {"file": "params/default.yaml", "run_ids": ["13-musique", "00-ours", "10-new"]}
    write_run(tmp_path, "00-ours", BACKEND, batch=batch)
    write_run(tmp_path, "10-new", VERDICT_NOTEBOOK, batch=batch, headline="Real evidence (no model call): x")
    write_run(tmp_path, "13-musique", "13_retrieval_benchmark", batch=batch, headline="musique: no claim")
    default = section(render_index(tmp_path).read_text(), "Batch <code>params/default.yaml</code>")
    real, others = default.split("<h3>The other runs</h3>")
    assert "<h3>Real evidence (LLM-free)</h3>" in real and "<td>13-musique</td>" in real
    assert "<td>00-ours</td>" in others and "<td>13-musique</td>" not in others
    assert default.index("Real evidence (no model call): x") < default.index(
        "<h3>Real evidence (LLM-free)</h3>"
    )


def test_a_batchs_sweep_report_is_linked_from_its_section(tmp_path):
    grid = {"file": "params/variations.yaml", "run_ids": ["04-a", "04-b", "15-sweep"]}
    write_run(tmp_path, "04-a", QA, batch=grid)
    write_run(tmp_path, "04-b", QA, batch=grid)
    write_run(
        tmp_path,
        "15-sweep",
        SWEEP_NOTEBOOK,
        batch=grid,
        label="sweep of 04_rag_vs_graphrag_qa over retrieval.k x retrieval.hops",
        headline="Sweep of 2 points: 0 of 3 differences to the reference are findings",
        files=("report.html",),
    )
    write_run(tmp_path, "04-ours", QA)
    page = render_index(tmp_path).read_text()
    variations = section(page, "Batch <code>params/variations.yaml</code>")
    assert (
        'Sweep: <a href="15-sweep/report.html">the sweep report</a> (run <code>15-sweep</code>, '
        '<span class="completed">completed</span>): sweep of 04_rag_vs_graphrag_qa over retrieval.k x '
        "retrieval.hops" in variations
    )
    assert "Sweep of 2 points: 0 of 3 differences" in variations
    assert "Sweep:" not in section(page, "Batch <code>params/default.yaml</code>")
