"""Papermill batches end to end: resumability from the cache (after a stop or a kill), one process
per run folder, and no secret in any output.
"""

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest
import yaml
from conftest import PROJECT_ROOT

from ragtrial.config.batch import load_batch
from ragtrial.report.index_page import render_index
from ragtrial.runner.batch import EMBEDDED_SERVER_LOG, run_batch
from ragtrial.runner.execute import batch_record

pytestmark = pytest.mark.usefixtures("notebook_kernels")


def batch_file(tmp_path, llm: dict) -> str:
    path = tmp_path / "batch.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "settings": {"llm": llm, "cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"}},
                "runs": [{"notebook": "00_backend_check"}],
            }
        )
    )
    return str(path)


def structured_aware_reply(body):
    if body.get("response_format"):
        return '{"city": "Tokyo", "continent": "Asia"}'
    return "Paris, the capital of France."


def test_secret_never_reaches_outputs_or_cache(scripted, tmp_path):
    scripted.default_reply = structured_aware_reply
    key = "sk-test-" + secrets.token_hex(16)
    batch = batch_file(
        tmp_path,
        {
            "backend": "openai_compatible",
            "base_url": scripted.base_url,
            "model": "scripted",
            "api_key_env": "RAGTRIAL_SECRET_UNDER_TEST",
        },
    )
    env = {**os.environ, "RAGTRIAL_SECRET_UNDER_TEST": key}
    done = subprocess.run(
        [sys.executable, "-m", "ragtrial", "run", batch, "--outputs", str(tmp_path / "out")],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("index.html")
    assert {r["authorization"] for r in scripted.chat_requests()} == {f"Bearer {key}"}  # the key was used
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "batch.yaml"]
    assert any(p.name == "report.html" for p in written) and any(p.suffix == ".sqlite" for p in written)
    leaks = [p for p in written if key.encode() in p.read_bytes()]
    assert leaks == []


def test_a_stopped_batch_records_the_interruption_and_resumes_without_paying_twice(scripted, tmp_path):
    scripted.default_reply = structured_aware_reply
    scripted.script.extend([("default",), ("sleep", 20)])  # the second model call hangs until the stop
    batch = batch_file(
        tmp_path,
        {"backend": "openai_compatible", "base_url": scripted.base_url, "model": "scripted", "timeout_s": 60},
    )
    command = [sys.executable, "-m", "ragtrial", "run", batch, "--outputs", str(tmp_path / "out")]
    proc = subprocess.Popen(
        command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while len(scripted.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "resume" in stderr
    run = json.loads(next((tmp_path / "out").glob("00_backend_check-*/run.json")).read_text())
    assert run["status"] == "interrupted" and run["ledger"]["llm_calls_live"] == 1
    assert "interrupted" in (tmp_path / "out" / "index.html").read_text()
    done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    run = json.loads(next((tmp_path / "out").glob("00_backend_check-*/run.json")).read_text())
    assert (
        run["status"] == "completed" and run["ledger"]["llm_calls_cached"] == 1
    )  # the paid call is not paid again
    assert len(scripted.requests) == 3


@pytest.mark.usefixtures("embedded_model")
def test_second_run_replays_everything_from_the_cache(tmp_path):
    batch = batch_file(tmp_path, {"backend": "embedded"})
    out = tmp_path / "out"
    first = run_batch(batch, root=PROJECT_ROOT, outputs=out, log=lambda _: None)
    assert [r.status for r in first] == ["completed"], first[0].error
    assert first[0].summary["llm_calls_live"] >= 2
    # the kernel called the batch's server (its log is in the outputs folder) and started none of its own
    own_log = out / first[0].run_id / "server.log"
    assert (out / EMBEDDED_SERVER_LOG).stat().st_size > 0 and not own_log.exists()
    second = run_batch(batch, root=PROJECT_ROOT, outputs=out, force=True, log=lambda _: None)
    assert second[0].status == "completed"
    s1, s2 = first[0].summary, second[0].summary
    assert (
        s2["llm_calls_live"] == 0 and s2["llm_calls_cached"] == s1["llm_calls_live"] + s1["llm_calls_cached"]
    )
    assert (s2["prompt_tokens"], s2["completion_tokens"]) == (s1["prompt_tokens"], s1["completion_tokens"])
    run = json.loads((out / first[0].run_id / "run.json").read_text())
    assert (
        run["status"] == "completed"
        and run["ledger"] == s2
        and run["settings"]["llm"]["backend"] == "embedded"
    )
    assert "gemma-3-270m-q4_k_m" in run["models"] and (out / "index.html").exists()
    skipped = run_batch(batch, root=PROJECT_ROOT, outputs=out, log=lambda _: None)
    assert skipped[0].status == "skipped"


class HeldReply:
    """A default reply whose `hold_at`-th model call waits until `release` is set (a call in flight
    for as long as the test needs, with no timing involved).
    """

    def __init__(self, hold_at: int):
        self.hold_at, self.calls, self.release = hold_at, 0, threading.Event()

    def __call__(self, body):
        self.calls += 1
        if self.calls == self.hold_at:
            self.release.wait(120)
        return structured_aware_reply(body)


def wait_until(condition, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)


def scripted_batch(scripted, tmp_path):
    batch = batch_file(
        tmp_path,
        {
            "backend": "openai_compatible",
            "base_url": scripted.base_url,
            "model": "scripted",
            "timeout_s": 150,
        },
    )
    return [sys.executable, "-m", "ragtrial", "run", batch, "--outputs", str(tmp_path / "out")]


def the_run(tmp_path) -> dict:
    return json.loads(next((tmp_path / "out").glob("00_backend_check-*/run.json")).read_text())


@pytest.mark.fault
def test_a_killed_batch_resumes_paying_once_and_keeps_what_the_killed_attempt_paid(scripted, tmp_path):
    held = HeldReply(hold_at=2)  # the second model call is in flight when the batch is killed
    scripted.default_reply = held
    command = scripted_batch(scripted, tmp_path)
    proc = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: len(scripted.requests) >= 2)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        held.release.set()
    killed = the_run(tmp_path)
    assert killed["status"] == "running" and killed["pid"] == proc.pid  # nobody could say otherwise
    render_index(tmp_path / "out")
    page = (tmp_path / "out" / "index.html").read_text()
    assert '<td class="interrupted">interrupted</td>' in page and "running</td>" not in page

    done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    run = the_run(tmp_path)
    assert run["status"] == "completed"
    [attempt] = run["attempts"]
    assert attempt["status"] == "killed" and attempt["ledger"]["llm_calls_live"] == 1
    assert run["ledger"]["llm_calls_cached"] == 1 and run["ledger"]["llm_calls_live"] == 1
    assert run["ledger_all_attempts"]["llm_calls_live"] == 2  # what the run paid over both attempts
    # Paid once each, but for the call in flight at the kill (asked again on resume).
    assert len(scripted.requests) == 3
    rows = pd.read_parquet(next((tmp_path / "out").glob("00_backend_check-*/ledger.parquet")))
    model_calls = rows[rows["kind"] != "embedding"]  # the local embedder's rows are no model call
    assert model_calls.groupby(["attempt", "attempt_status"]).size().to_dict() == {
        (1, "killed"): 1,
        (2, "completed"): 2,
    }
    page = (tmp_path / "out" / "index.html").read_text()
    assert "1 killed: 1 live calls" in page


@pytest.mark.fault
def test_a_second_copy_of_a_running_batch_refuses_naming_the_holder(scripted, tmp_path):
    held = HeldReply(hold_at=2)  # the first copy is mid-run while the second starts
    scripted.default_reply = held
    command = scripted_batch(scripted, tmp_path)
    first = subprocess.Popen(
        command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_until(lambda: len(scripted.requests) >= 2)
        second = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    finally:
        held.release.set()
    _, first_err = first.communicate(timeout=300)
    assert first.returncode == 0, first_err
    assert second.returncode == 1
    [line] = second.stderr.strip().splitlines()
    assert line.startswith("LOCKED 00_backend_check-") and f"in use by process {first.pid}" in line
    assert len(scripted.requests) == 2  # the notebook's two calls, paid once
    run = the_run(tmp_path)
    assert run["status"] == "completed" and run["ledger"]["llm_calls_live"] == 2 and run["attempts"] == []


def test_run_json_records_the_batch_file_and_every_run_id_of_the_batch(scripted, tmp_path):
    scripted.default_reply = structured_aware_reply
    default = PROJECT_ROOT / "params" / "default.yaml"
    overrides = {
        "llm": {"backend": "openai_compatible", "base_url": scripted.base_url, "model": "scripted"},
        "cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"},
    }
    [result] = run_batch(
        default, overrides, root=PROJECT_ROOT, outputs=tmp_path / "out", only=["00_backend_check"], log=print
    )
    assert result.status == "completed", result.error
    specs, _ = load_batch(default, overrides)
    run = json.loads((result.run_dir / "run.json").read_text())
    # inside the project, the file relative to its root; the run ids of every notebook, not only those run
    assert run["batch"] == {"file": "params/default.yaml", "run_ids": [s.run_id for s in specs]}
    assert len(run["batch"]["run_ids"]) == len(load_batch(default)[0]) > 1
    outside = tmp_path / "batch.yaml"
    assert batch_record(outside, PROJECT_ROOT, specs[:1])["file"] == str(outside)  # as given
