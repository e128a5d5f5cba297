"""Every file the kit writes gets the permissions the umask gives a new file (0666 & ~umask), the same
as the ledger and the executed notebook, which are opened the ordinary way: no report, record or table
is private to its writer while the rest of the run folder is readable.
"""

from __future__ import annotations

import json
import os
import stat

import nbformat
import pandas as pd
import pytest
from conftest import PROJECT_ROOT

from ragtrial.report.files import write_json, write_table, write_text
from ragtrial.report.html import render_report
from ragtrial.report.index_page import render_index


@pytest.fixture(params=[0o022, 0o002, 0o077])
def umask(request):
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_written_files_follow_the_umask_like_an_ordinary_open(tmp_path, umask):
    ordinary = tmp_path / "ledger.csv"
    ordinary.write_text("what the ledger writes\n")
    notebook = nbformat.v4.new_notebook()
    nbformat.write(notebook, tmp_path / "notebook.ipynb")
    frame = pd.DataFrame({"a": [1]})
    written = [
        write_text(tmp_path / "headline.txt", "x\n"),
        write_json(tmp_path / "run" / "run.json", {"status": "completed"}),
        write_table(tmp_path / "tables" / "t.csv", frame),
        write_table(tmp_path / "tables" / "t.parquet", frame),
        render_report(tmp_path / "notebook.ipynb", tmp_path / "report.html"),
        render_index(tmp_path),
    ]
    assert mode(ordinary) == 0o666 & ~umask
    assert {path.name: mode(path) for path in written} == {path.name: 0o666 & ~umask for path in written}
    assert not list(tmp_path.rglob("*.tmp"))  # no temp file left behind


def test_a_rewrite_keeps_the_umask_and_replaces_the_content(tmp_path, umask):
    path = tmp_path / "run.json"
    path.write_text("old")
    os.chmod(path, 0o600)
    write_json(path, {"status": "running"})
    assert mode(path) == 0o666 & ~umask and '"running"' in path.read_text()


@pytest.mark.usefixtures("notebook_kernels")
def test_a_runs_files_all_have_the_same_permissions(scripted, tmp_path):
    """A whole run through papermill: report.html, run.json, the tables and index.html are as readable
    as the ledger and the notebook (they were 0600 beside 0644 ones).
    """
    from ragtrial.runner.batch import run_batch

    scripted.default_reply = lambda body: (
        '{"city": "Tokyo", "continent": "Asia"}' if body.get("response_format") else "Paris."
    )
    batch = tmp_path / "batch.yaml"
    llm = {"backend": "openai_compatible", "base_url": scripted.base_url, "model": "scripted"}
    cache = {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"}
    batch.write_text(json.dumps({"settings": {"llm": llm, "cache": cache},
                                 "runs": [{"notebook": "00_backend_check"}]}))  # fmt: skip
    previous = os.umask(0o022)
    try:
        [result] = run_batch(batch, root=PROJECT_ROOT, outputs=tmp_path / "out", log=lambda line: None)
    finally:
        os.umask(previous)
    assert result.status == "completed", result.error
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file() and p.suffix != ".lock"]
    names = {p.name for p in files}
    assert {"report.html", "run.json", "index.html", "notebook.ipynb", "ledger.csv"} <= names
    assert any(p.parent.name == "tables" for p in files)
    assert {p.relative_to(tmp_path).as_posix(): mode(p) for p in files} == {
        p.relative_to(tmp_path).as_posix(): 0o644 for p in files
    }


@pytest.mark.fault
def test_formula_text_is_neutralised_in_the_csv_and_kept_raw_in_the_parquet(tmp_path):
    hostile = ['=HYPERLINK("http://x.test","click")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "plain"]
    frame = pd.DataFrame({"answer": hostile, "score": [1.0, -2.0, 3.0, 4.0, 5.0]})
    write_table(tmp_path / "t.csv", frame)
    write_table(tmp_path / "t.parquet", frame)
    shown = pd.read_csv(tmp_path / "t.csv")
    assert list(shown["answer"]) == [f"'{text}" for text in hostile[:4]] + ["plain"]
    assert list(shown["score"]) == [1.0, -2.0, 3.0, 4.0, 5.0]  # numbers stay numbers
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "t.parquet"), frame)


def test_a_csv_written_in_pieces_is_the_csv_of_the_whole_table(tmp_path, monkeypatch):
    """A table is written CSV_ROWS rows at a time (07's answers at paper size took 1.4 GB beside the
    table when written at once): one header, every row in order, the later pieces neutralised too.
    """
    from ragtrial.report import files

    frame = pd.DataFrame({"answer": ["a", "=1+1", "b", "@x", "c"], "score": [1.0, 2.5, None, 4.0, 5.0]})
    monkeypatch.setattr(files, "CSV_ROWS", 2)
    write_table(tmp_path / "t.csv", frame)
    assert (tmp_path / "t.csv").read_text() == files.spreadsheet_safe(frame).to_csv(index=False)
    write_table(tmp_path / "empty.csv", frame.iloc[:0])
    assert (tmp_path / "empty.csv").read_text() == "answer,score\n"
