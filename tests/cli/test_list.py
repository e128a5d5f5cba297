"""`ragtrial list`: one row per run folder of the outputs folder, from its run.json, with the status
the index page shows (a `running` record whose process is gone is interrupted), and nothing of the
folders that are not runs.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ragtrial.cli import main

HEADLINE = "Local search beats naive RAG on multi-hop questions by 12 points of accuracy " * 3


def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def write_run(outputs: Path, run_id: str, **record) -> Path:
    run_dir = outputs / run_id
    run_dir.mkdir(parents=True)
    base = {
        "run_id": run_id,
        "notebook": run_id.rsplit("-", 1)[0],
        "label": "",
        "status": "completed",
        "settings": {
            "llm": {"backend": "openai_compatible", "model": "gpt-x"},
            "data": {"dataset": "generated", "size": "tiny"},
        },
        "started_at": "2025-01-01T10:00:00+00:00",
        "batch": {"file": "params/default.yaml", "run_ids": [run_id]},
    }
    (run_dir / "run.json").write_text(json.dumps({**base, **record}))
    return run_dir


@pytest.fixture
def outputs(tmp_path):
    out = tmp_path / "outputs"
    write_run(
        out,
        "04_rag_vs_graphrag_qa-aaaa",
        label="k=5",
        duration_s=95.2,
        headline=HEADLINE,
        ledger={"llm_calls_live": 120, "llm_calls_cached": 7, "failures": 2},
    )
    write_run(
        out,
        "00_backend_check-bbbb",
        status="failed",
        duration_s=3,
        error="DataError: data set folder not found\ntraceback...",
        settings={"llm": {"backend": "embedded", "model": "gemma-3-270m-q4_k_m"}, "data": {}},
        ledger={"llm_calls_live": 0, "llm_calls_cached": 0, "failures": 0},
        started_at="2025-01-01T09:00:00+00:00",
    )
    write_run(
        out, "01_build_index-cccc", status="running", pid=dead_pid(), started_at="2025-01-01T11:00:00+00:00"
    )
    write_run(
        out,
        "02_question_entity_distribution-dddd",
        status="running",
        pid=os.getpid(),
        started_at="2025-01-01T12:00:00+00:00",
        batch={"file": "params/other.yaml", "run_ids": []},
    )
    (out / "cache").mkdir()
    (out / "cache" / "ragtrial.sqlite").write_bytes(b"")
    (out / "indexes" / "abc").mkdir(parents=True)
    (out / "broken-eeee").mkdir()
    (out / "broken-eeee" / "run.json").write_text("{not json")
    return out


def listed(capsys, *args: str) -> tuple[int, list[str]]:
    code = main(["list", *args])
    return code, capsys.readouterr().out.splitlines()


def row(lines: list[str], run_id: str) -> str:
    (line,) = [line for line in lines if line.startswith(run_id)]
    return line


def test_each_run_is_a_row_with_its_status_model_data_calls_and_wall_time(outputs, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # a terminal wide enough for every headline
    code, lines = listed(capsys, "--outputs", str(outputs))
    assert code == 0
    assert lines[0].split()[:5] == ["run", "label", "status", "model", "data"]
    qa = row(lines, "04_rag_vs_graphrag_qa-aaaa").split()
    assert qa[1:5] == ["k=5", "completed", "gpt-x", "generated"] and "120/7" in qa and "1m35s" in qa
    failed = row(lines, "00_backend_check-bbbb")
    assert "failed" in failed and "gemma-3-270m-q4_k_m (embedded)" in failed
    assert failed.endswith("DataError: data set folder not found")  # the error's first line only
    assert " interrupted " in row(lines, "01_build_index-cccc")  # its process is gone
    running = row(lines, "02_question_entity_distribution-dddd")
    assert " running " in running and "so far" in running  # this process: alive
    assert "unreadable" in row(lines, "broken-eeee")
    runs = [line.split()[0] for line in lines[2:-1]]
    assert "cache" not in runs and "indexes" not in runs and len(runs) == 5
    assert runs[:2] == ["broken-eeee", "00_backend_check-bbbb"]  # oldest first
    assert lines[-1] == (
        f"5 runs in {outputs}: 1 completed, 1 failed, 1 interrupted, 1 running, 1 unreadable"
    )


def test_the_headline_is_cut_to_the_terminal(outputs, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "220")
    _, lines = listed(capsys, "--outputs", str(outputs))
    qa = row(lines, "04_rag_vs_graphrag_qa-aaaa")
    assert qa.endswith("…") and HEADLINE.split()[0] in qa
    assert 200 < len(qa) <= 220


def test_batch_selects_the_runs_of_one_batch_file(outputs, capsys):
    _, lines = listed(capsys, "--outputs", str(outputs), "--batch", "other")
    assert [line.split()[0] for line in lines[2:-1]] == ["02_question_entity_distribution-dddd"]
    _, same = listed(capsys, "--outputs", str(outputs), "--batch", "params/other.yaml")
    assert same[2:-1] == lines[2:-1]


def test_an_unknown_batch_lists_the_known_ones(outputs, capsys):
    code = main(["list", "--outputs", str(outputs), "--batch", "nope"])
    err = capsys.readouterr().err
    assert code == 2 and "--batch nope" in err and "params/default.yaml, params/other.yaml" in err


def test_an_empty_outputs_folder_says_so(tmp_path, capsys):
    code, lines = listed(capsys, "--outputs", str(tmp_path))
    assert code == 0 and lines == [f"no runs in {tmp_path.resolve()}"]
