"""Notebooks 02 and 03 end to end against the scripted server: each completes and its report's
prose is worded from the tables it saved.
"""

from __future__ import annotations

import pandas as pd
from conftest import endpoint_settings, run_default_notebooks
from traceable import assert_narrated_from_saved_tables

SECTIONS = {
    "index": {"graph_source": "nlp"},
    "questions": {"generators": ["summary", "graph"], "summary_questions": 2, "per_level": 2},
}


def test_notebooks_02_and_03_are_narrated_from_their_saved_tables(scripted, tmp_path, notebook_kernels):
    results = run_default_notebooks(
        endpoint_settings(scripted.base_url, tmp_path, **SECTIONS),
        tmp_path,
        "02_question_entity_distribution",
        "03_question_relevance",
    )
    for result in results:
        assert_narrated_from_saved_tables(result.run_dir)
    findings = pd.read_parquet(results[0].run_dir / "tables" / "findings.parquet")
    questions = pd.read_parquet(results[0].run_dir / "tables" / "questions.parquet")
    kept = findings[(findings["statement"] == "questions kept") & (findings["subject"] == "")]
    assert kept["value"].tolist() == [len(questions)]
