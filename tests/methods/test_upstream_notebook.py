"""Notebook 11 end to end against the scripted server, as the default batch runs it: GraphRAG (its own
environment) over its Operation Dulce output and LightRAG over the kit's import of it answer beside
the kit's twins; the side-by-side tables, the judge, the systems' versions in run.json.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import endpoint_settings, run_default_notebooks
from test_graphrag_worker import graphrag_reply
from traceable import assert_narrated_from_saved_tables

pytestmark = pytest.mark.usefixtures("notebook_kernels", "upstream_systems")


def test_notebook_11_puts_the_real_systems_beside_the_kits_and_records_them(scripted, tmp_path):
    scripted.default_reply = graphrag_reply  # structured replies from their schema, map points, text
    overrides = endpoint_settings(scripted.base_url, tmp_path, upstream={"bootstrap_resamples": 200})
    (result,) = run_default_notebooks(overrides, tmp_path, "11_upstream_systems")
    read = lambda name: pd.read_parquet(result.run_dir / "tables" / f"{name}.parquet")  # noqa: E731
    answers = read("answers")
    assert set(answers["method"]) == {
        "graphrag_local",
        "local_search",
        "graphrag_global",
        "global_search",
        "lightrag_hku_hybrid",
        "lightrag",
    }
    upstream = answers[answers["method"].isin(["graphrag_local", "graphrag_global", "lightrag_hku_hybrid"])]
    assert (upstream["calls"] > 0).all()
    summary = read("side_by_side_summary")
    assert list(zip(summary["upstream"], summary["twin"], strict=True)) == [
        ("graphrag_local", "local_search"),
        ("graphrag_global", "global_search"),
        ("lightrag_hku_hybrid", "lightrag"),
    ]
    systems = read("systems").set_index("system")
    assert systems.loc["graphrag", "version"] == "3.3.0" and systems.loc["lightrag", "version"] == "1.5.7"
    record = json.loads((result.run_dir / "run.json").read_text())
    assert set(record["systems"]) == {"graphrag", "lightrag"}
    assert record["packages"]["lightrag-hku"] == "1.5.7"
    report = (result.run_dir / "report.html").read_text()
    assert "graphrag_local vs local_search" in report and "Context overlap" in report
    assert_narrated_from_saved_tables(result.run_dir)
