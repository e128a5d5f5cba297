"""Every notebook of the default batch that calls a model renders a report saying what failed when
every model call fails: the endpoint refuses each request or answers it with empty text.
The real-evidence runs (notebook 13) call no model; tests/evaluation/test_benchmark_notebook.py runs
them against an endpoint that refuses every connection.
"""

from __future__ import annotations

import json
import zlib

import pandas as pd
import pytest
from conftest import PROJECT_ROOT

from ragtrial.config.notebooks import notebook_specs
from ragtrial.runner.batch import run_batch

pytestmark = [pytest.mark.fault, pytest.mark.usefixtures("notebook_kernels")]


FAILURES = {"http_400": ("status", 400), "empty_reply": ("text", "")}


def every_model_call_fails(request: dict) -> tuple:
    """The scripted server's step for `request`: embeddings are answered (the failure under test is
    the model's, not the embedder's); a model call is refused with a 400 or answered with empty text,
    which of the two decided by its body (so a retry fails as the first attempt did), both kinds in
    every notebook that makes a few calls.
    """
    if request["path"].endswith("/embeddings"):
        return ("default",)
    digest = zlib.crc32(json.dumps(request["body"], sort_keys=True).encode())
    return list(FAILURES.values())[digest % len(FAILURES)]


def test_every_notebook_reports_what_failed_when_every_call_fails(scripted, tmp_path):
    scripted.step_for = every_model_call_fails
    kinds = tuple(FAILURES)
    overrides = {
        "llm": {
            "backend": "openai_compatible",
            "base_url": scripted.base_url,
            "model": "scripted",
            "fold_system": False,
            # an empty reply is retried: once, at once, so the test does not wait out backoffs
            "max_retries": 1,
            "backoff_initial_s": 0,
            "backoff_max_s": 0,
        },
        "embeddings": {"backend": "openai_compatible", "base_url": scripted.base_url, "model": "emb"},
        "cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"},
        "index": {"store_path": str(tmp_path / "indexes")},
        "calibration": {
            "studies": 2,
            "simulated_trials": [1],
            "simulated_repeats": [1],
            "simulated_questions": [6],
        },
    }
    results = run_batch(
        PROJECT_ROOT / "params" / "default.yaml",
        overrides,
        root=PROJECT_ROOT,
        outputs=tmp_path / "out",
        only=[spec.name for spec in notebook_specs() if not spec.real_evidence],
        log=lambda _: None,
    )
    (verdict,) = [r for r in results if r.notebook == "10_verdict"]
    (calibration,) = [r for r in results if r.notebook == "12_judge_calibration"]
    (comparison,) = [r for r in results if r.notebook == "14_compare_runs"]
    (sweep,) = [r for r in results if r.notebook == "15_sweep_report"]
    answering = [r for r in results if r not in (verdict, calibration, comparison, sweep)]
    # the comparison and the sweep read saved tables only: this batch has one run of 04 and no grid,
    # so nothing to compare and no sweep
    for reader in (comparison, sweep):
        assert reader.status == "completed", reader.error
        assert reader.summary["llm_calls_live"] == 0
    # the calibration makes no model call either: with no judgment in 06's audit it simulates the
    # model's default judge, and says so
    assert calibration.status == "completed", calibration.error
    assert calibration.summary["llm_calls_live"] == 0
    assert "no unbiased judgment to fit" in (calibration.run_dir / "report.html").read_text()
    # the verdict makes no model call: it completes, and says which comparisons the failures emptied
    assert verdict.status == "completed", verdict.error
    assert verdict.summary["llm_calls_live"] == 0
    assert "never scored" in (verdict.run_dir / "report.html").read_text()
    reasons = pd.read_parquet(verdict.run_dir / "tables" / "left_out_counts.parquet")["reason"]
    assert all(any(kind in reason for reason in reasons) for kind in kinds), list(reasons)
    named: set[str] = set()
    for result in answering:
        # the backend check fails when no model answered (its report still says what failed)
        expected = "failed" if result.notebook == "00_backend_check" else "completed"
        assert result.status == expected, f"{result.run_id}: {result.error}"
        assert result.summary["llm_calls_live"] > 0
        report = (result.run_dir / "report.html").read_text()
        assert any(kind in report for kind in kinds), f"{result.run_id}'s report names no failure {kinds}"
        named |= {kind for kind in kinds if kind in report}
    assert named == set(kinds)  # both kinds went through the notebooks' failure paths
