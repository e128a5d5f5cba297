"""Notebooks 02 and 03 end to end against the scripted server: each completes and its report's
prose is worded from the tables it saved.
"""

from __future__ import annotations

import pandas as pd
from conftest import PROJECT_ROOT, endpoint_settings
from traceable import assert_narrated_from_saved_tables

from ragtrial.runner.batch import run_batch

SECTIONS = {
    "index": {"graph_source": "nlp"},
    "questions": {"generators": ["summary", "graph"], "summary_questions": 2, "per_level": 2},
}


def test_notebooks_02_and_03_are_narrated_from_their_saved_tables(scripted, tmp_path, notebook_kernels):
    results = run_batch(
        PROJECT_ROOT / "params" / "default.yaml",
        endpoint_settings(scripted.base_url, tmp_path, **SECTIONS),
        root=PROJECT_ROOT,
        outputs=tmp_path / "out",
        only=["02_question_entity_distribution", "03_question_relevance"],
        log=lambda _: None,
    )
    for result in results:
        assert result.status == "completed", (result.run_id, result.error)
        assert_narrated_from_saved_tables(result.run_dir)
    findings = pd.read_parquet(results[0].run_dir / "tables" / "findings.parquet")
    questions = pd.read_parquet(results[0].run_dir / "tables" / "questions.parquet")
    kept = findings[(findings["statement"] == "questions kept") & (findings["subject"] == "")]
    assert kept["value"].tolist() == [len(questions)]
