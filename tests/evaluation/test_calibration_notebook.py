"""Notebook 12 end to end with no model: the simulated judge from the model's defaults (no audit to fit),
a few small simulated studies; it saves its tables, records its headline and makes no model call.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import PROJECT_ROOT
from traceable import assert_narrated_from_saved_tables

from ragtrial.runner.batch import run_batch
from ragtrial.runner.context import HEADLINE_FILE

pytestmark = pytest.mark.usefixtures("notebook_kernels")

SMALL = {
    "fit_audit": False,
    "parameters": {"position_bias": 0.3, "classic_first_win_rate": 0.75},
    "studies": 3,
    "simulated_trials": [1, 2],
    "simulated_repeats": [1],
    "simulated_questions": [8, 12],
    "workers": 1,
    "bootstrap_resamples": 100,
}


def test_notebook_12_runs_against_nothing_and_recommends_a_design(tmp_path):
    batch = tmp_path / "batch.yaml"
    batch.write_text("runs:\n  - notebook: 12_judge_calibration\n")
    overrides = {
        # an endpoint nothing listens on: a model call would fail the run
        "llm": {"backend": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "max_retries": 0},
        "cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"},
        "calibration": SMALL,
    }
    (result,) = run_batch(batch, overrides, root=PROJECT_ROOT, outputs=tmp_path / "out", log=lambda _: None)
    assert result.status == "completed", result.error
    assert result.summary["llm_calls_live"] == 0
    read = lambda name: pd.read_parquet(result.run_dir / "tables" / f"{name}.parquet")  # noqa: E731
    summary = read("calibration_summary")
    assert set(summary["protocol"]) == {"classic", "unbiased"}
    assert set(summary["questions"]) == {8, 12} and summary["studies"].eq(3).all()
    recommendation = read("recommendation")
    assert {"unbiased", "classic"} == set(recommendation["protocol"]) and recommendation["chosen"].sum() <= 1
    assert not read("classic_spurious_winners").empty and not read("design_check").empty
    headline = (result.run_dir / HEADLINE_FILE).read_text()
    assert headline.startswith("Calibration by simulation:") and "10-point win-rate difference" in headline
    assert_narrated_from_saved_tables(result.run_dir)
