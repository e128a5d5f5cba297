"""The batch's terminal lines (`runner.progress`) and a failed run's one-line reason (`runner.kernel`),
on hand-written progress files, ledgers and papermill exceptions.
"""

from __future__ import annotations

import json
import time

import pytest
from papermill.exceptions import PapermillExecutionError

from ragtrial.llm.ledger import CallRecord, Ledger
from ragtrial.llm.progress import PROGRESS_FILE
from ragtrial.runner.kernel import failure_reason
from ragtrial.runner.progress import BatchMonitor, duration, progress_state, summary_table


def call(cached: bool, failure: str = "", kind: str = "completion") -> CallRecord:
    return CallRecord("r", kind, "s", "", "m", "", 0, cached, 1, 1, 0.1, 0 if cached else 1, failure)


def stage(label: str, done: int, total: int, live: int = 0, cached: int = 0, failed: int = 0) -> dict:
    return {"label": label, "done": done, "total": total, "live": live, "cached": cached, "failed": failed}


@pytest.mark.parametrize(("seconds", "shown"), [(0.4, "0s"), (59, "59s"), (92, "1m32s"), (7500, "2h05m")])
def test_durations_read_at_a_glance(seconds, shown):
    assert duration(seconds) == shown


def test_the_line_names_the_outer_stage_its_latest_inner_one_and_the_outer_stages_calls(tmp_path):
    stages = [stage("answers", 12, 40, live=30, cached=2), stage("map", 1, 8), stage("map", 3, 8, failed=1)]
    (tmp_path / PROGRESS_FILE).write_text(json.dumps({"stages": stages}))
    assert progress_state(tmp_path) == "answers 12/40 › map 3/8 · calls 30 live 2 cached"


def test_between_stages_the_line_says_still_running_with_the_ledgers_calls(tmp_path):
    ledger = Ledger("r", tmp_path / "ledger.csv")
    for row in (call(False), call(False, "timeout"), call(True), call(False, kind="embedding")):
        ledger.record(row)
    (tmp_path / PROGRESS_FILE).write_text(json.dumps({"stages": []}))
    assert progress_state(tmp_path) == "still running · ledger 2 live 1 cached 1 failed"
    (tmp_path / PROGRESS_FILE).unlink()
    (tmp_path / "ledger.csv").unlink()
    assert progress_state(tmp_path) == "still running · ledger 0 live 0 cached"  # nothing yet


def test_the_monitor_logs_running_runs_only_and_is_quiet_when_nothing_changed(tmp_path):
    lines: list[str] = []
    (tmp_path / PROGRESS_FILE).write_text(json.dumps({"stages": [stage("answers", 1, 4)]}))
    with BatchMonitor(lines.append, every_s=0.05) as monitor:
        monitor.started("[1/2]", "04-x", tmp_path)
        deadline = time.monotonic() + 10
        while not lines and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # several polls, the same state: one line
        monitor.finished("04-x")
        (tmp_path / PROGRESS_FILE).write_text(json.dumps({"stages": [stage("answers", 2, 4)]}))
        time.sleep(0.3)
    assert len(lines) == 1 and lines[0].startswith("[1/2] 04-x · answers 1/4 · calls 0 live 0 cached · ")


def test_the_summary_table_has_a_row_per_run_and_the_totals():
    rows = [
        {
            "run": "04-a",
            "label": "big",
            "status": "completed",
            "summary": {"llm_calls_live": 120},
            "seconds": 95,
        },
        {
            "run": "10-b",
            "label": "",
            "status": "failed",
            "summary": {"llm_calls_live": 3, "llm_calls_cached": 7, "failures": 2},
            "seconds": 4,
        },
    ]
    header, rule, first, second, _, total = summary_table(rows, batch_seconds=101)
    assert header.split()[:3] == ["run", "label", "status"] and set(rule) == {"-", " "}
    assert first.split() == ["04-a", "big", "completed", "120", "0", "0", "1m35s"]
    assert second.split() == ["10-b", "failed", "3", "7", "2", "4s"]
    assert total.split() == ["2", "runs", "1", "completed,", "1", "failed", "123", "7", "2", "1m41s"]
    assert len({len(line) for line in (header, rule)}) == 1  # the columns line up


def executed(ename: str, evalue: str, traceback: list[str]) -> PapermillExecutionError:
    return PapermillExecutionError(3, 5, "load()", ename, evalue, traceback)


def test_a_notebook_failure_is_its_own_exception_in_one_line():
    err = executed(
        "DataError", "file corpus/x: data set folder not found", ["\x1b[0;31mDataError\x1b[0m ..."]
    )
    assert failure_reason(err) == "DataError: file corpus/x: data set folder not found (notebook cell In [5])"
    assert not str(err).strip().startswith("DataError")  # papermill's own message is its banner


def test_an_exception_without_a_value_takes_its_message_from_the_traceback():
    traceback = [
        "\x1b[0;31m-----\x1b[0m",
        "\x1b[0;31mDataError\x1b[0m: file corpus/x: data set folder not found",
    ]
    assert failure_reason(executed("DataError", "", traceback)).startswith(
        "DataError: file corpus/x: data set folder not found"
    )


def test_a_kernel_failure_names_the_kernels_own_output(tmp_path):
    log = tmp_path / "kernel.log"
    assert failure_reason(RuntimeError("Kernel died before replying to kernel_info"), log) == (
        "RuntimeError: Kernel died before replying to kernel_info"
    )
    log.write_text("zmq.error.ZMQError: Address in use\n")
    assert failure_reason(RuntimeError("Kernel died"), log) == (
        "RuntimeError: Kernel died (the kernel's own output: kernel.log in the run folder)"
    )
