"""A stage's progress in the run folder's progress file (for `ragtrial run`), and its lines printed only
outside a batch.
"""

from __future__ import annotations

import io
import threading

from conftest import make_llm

from ragtrial.llm import fanout, progress
from ragtrial.llm.progress import BATCH_ENV, read_progress


def test_a_running_stage_is_in_the_progress_file_with_its_units_and_calls(scripted, tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "WRITE_EVERY_S", 0.0)
    llm = make_llm(scripted.base_url, tmp_path, concurrency=1)  # units in order
    seen: list[dict] = []
    third = threading.Event()

    def unit(i: int) -> str:
        if i == 2:  # two units done, the third running: what the file says now
            seen.append(read_progress(tmp_path))
            third.set()
        return llm.complete(f"question {i}", stage="answers").text

    answers = llm.fan_out(unit, range(4), label="answers")
    assert third.is_set() and len(answers) == 4
    [stage] = seen[0]["stages"]
    assert {k: stage[k] for k in ("label", "done", "total", "live", "cached", "failed")} == {
        "label": "answers",
        "done": 2,
        "total": 4,
        "live": 2,
        "cached": 0,
        "failed": 0,
    }
    assert read_progress(tmp_path)["stages"] == []  # the stage ended


def test_an_inner_stage_is_listed_after_the_outer_one(scripted, tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "WRITE_EVERY_S", 0.0)
    llm = make_llm(scripted.base_url, tmp_path, concurrency=1)
    inner_seen: list[list[str]] = []

    def inner(j: int) -> int:
        inner_seen.append([s["label"] for s in read_progress(tmp_path)["stages"]])
        return j

    llm.fan_out(lambda i: llm.fan_out(inner, range(2), label="map"), range(2), label="answers")
    assert inner_seen and all(labels == ["answers", "map"] for labels in inner_seen)


def test_progress_lines_print_outside_a_batch_only(monkeypatch):
    monkeypatch.setattr(fanout, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(fanout, "PROGRESS_EVERY_S", 0.0)
    monkeypatch.delenv(BATCH_ENV, raising=False)
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    fanout.fan_out(lambda i: i, range(3), concurrency=1, label="extract")
    assert "extract: [" in out.getvalue()
    monkeypatch.setenv(BATCH_ENV, "1")
    out.truncate(0)
    fanout.fan_out(lambda i: i, range(3), concurrency=1, label="extract")
    assert out.getvalue() == ""
