"""A run its batch stopped is recorded `interrupted` even when its own process could not record it
(the Ray engine's driver records it after its wait), and a run that recorded its outcome keeps it.
"""

from __future__ import annotations

import datetime as dt
import json

from ragtrial.runner.execute import record_interruption


def write_record(run_dir, status: str) -> None:
    started = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=30)).isoformat(timespec="seconds")
    record = {"run_id": "r", "notebook": "00_backend_check", "status": status, "started_at": started}
    (run_dir / "run.json").write_text(json.dumps({**record, "attempts": []}))


def test_a_run_still_running_when_its_batch_stopped_is_recorded_interrupted(tmp_path):
    write_record(tmp_path, "running")
    (tmp_path / "progress.json").write_text("{}")
    record_interruption(tmp_path)
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["status"] == "interrupted" and "batch stopped" in run["error"]
    assert run["ledger"]["llm_calls_live"] == 0 and run["duration_s"] >= 29
    assert not (tmp_path / "progress.json").exists()


def test_a_run_that_recorded_its_outcome_keeps_it(tmp_path):
    write_record(tmp_path, "completed")
    before = (tmp_path / "run.json").read_text()
    record_interruption(tmp_path)
    assert (tmp_path / "run.json").read_text() == before
    record_interruption(tmp_path / "never_started")  # no record: nothing to say
    assert not (tmp_path / "never_started").exists()
