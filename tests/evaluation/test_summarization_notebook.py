"""Notebook 05 end to end against the scripted server: every method's summary is scored against the
references, compared with the baseline on the same questions, and the report's prose words only the
tables the run saved.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import endpoint_settings, run_default_notebooks
from traceable import assert_narrated_from_saved_tables

pytestmark = pytest.mark.usefixtures("notebook_kernels")


def test_summaries_are_scored_paired_with_the_baseline_and_narrated_from_saved_tables(scripted, tmp_path):
    scripted.default_reply = lambda body: "Ebenezer Scrooge keeps the counting-house and meets three spirits."
    overrides = endpoint_settings(
        scripted.base_url,
        tmp_path,
        index={"graph_source": "nlp"},
        summarization={"questions_per_type": 2, "bootstrap_resamples": 200},
    )
    (result,) = run_default_notebooks(overrides, tmp_path, "05_rag_vs_graphrag_summarization")
    tables = result.run_dir / "tables"
    answers = pd.read_parquet(tables / "answers.parquet")
    scores = pd.read_parquet(tables / "scores.parquet")
    paired = pd.read_parquet(tables / "paired_vs_baseline.parquet")
    methods = set(answers["method"])
    assert len(methods) >= 2 and set(scores["method"]) == methods
    # every answered question is scored once per method, against its references
    assert len(scores) == len(answers) and scores["rouge2_f"].between(0, 1).all()
    baseline = json.loads((result.run_dir / "run.json").read_text())["settings"]["summarization"]["baseline"]
    assert set(paired["baseline"]) == {baseline} and baseline not in set(paired["method"])
    assert_narrated_from_saved_tables(result.run_dir)
