"""Papermill batches end to end: resumability from the cache, and no secret in any output."""

import json
import os
import secrets
import signal
import subprocess
import sys
import time

import pytest
import yaml
from conftest import PROJECT_ROOT

from ragtrial.runner.batch import run_batch


def batch_file(tmp_path, llm: dict) -> str:
    path = tmp_path / "batch.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "settings": {"llm": llm, "cache_path": str(tmp_path / "cache.sqlite")},
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


@pytest.mark.embedded
def test_second_run_replays_everything_from_the_cache(tmp_path):
    batch = batch_file(tmp_path, {"backend": "embedded"})
    out = tmp_path / "out"
    first = run_batch(batch, root=PROJECT_ROOT, outputs=out, log=lambda _: None)
    assert [r.status for r in first] == ["completed"], first[0].error
    assert first[0].summary["llm_calls_live"] >= 2
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
