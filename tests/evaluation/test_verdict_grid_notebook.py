"""Notebook 10 over a grid, end to end against the scripted server: a batch whose notebook 04 runs at
two points of `retrieval.k` gets the verdict of each point (table `point_verdicts`, the report's closing
section), not the latest point's alone; the sweep report the grid adds after its points (notebook 15)
pairs them and is linked from the index page; notebook 14 at the batch's end compares the points.
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from conftest import PROJECT_ROOT, cited_answer_reply, endpoint_settings
from traceable import assert_narrated_from_saved_tables

from ragtrial.runner.batch import run_batch

pytestmark = [pytest.mark.usefixtures("notebook_kernels"), pytest.mark.slow]


def test_the_verdict_of_a_batchs_grid_is_given_point_by_point(scripted, tmp_path):
    scripted.default_reply = cited_answer_reply
    batch = tmp_path / "grid.yaml"
    batch.write_text(
        yaml.safe_dump(
            {
                "description": "a grid of 04 with its verdict per point",
                "settings": {
                    "index": {"graph_source": "nlp"},
                    "qa": {
                        "methods": ["hybrid", "graph_walk"],
                        "baseline": "hybrid",
                        "questions_per_type": 2,
                        "bootstrap_resamples": 200,
                    },
                    "verdict": {"bootstrap_resamples": 200},
                    "compare": {"bootstrap_resamples": 200},
                    "sweep": {"bootstrap_resamples": 200},
                },
                "workers": 1,
                "runs": [
                    {"notebook": "01_build_index"},
                    {"notebook": "04_rag_vs_graphrag_qa", "grid": {"retrieval.k": [2, 4]}},
                    {"notebook": "10_verdict"},
                    {"notebook": "14_compare_runs"},
                ],
            }
        )
    )
    results = run_batch(
        batch,
        endpoint_settings(scripted.base_url, tmp_path),
        root=PROJECT_ROOT,
        outputs=tmp_path / "out",
        log=lambda _: None,
    )
    for result in results:
        assert result.status == "completed", (result.run_id, result.error)
    assert [r.run_id.rsplit("-", 1)[0] for r in results] == [
        "01_build_index",
        "04_rag_vs_graphrag_qa",
        "04_rag_vs_graphrag_qa",
        "15_sweep_report",
        "10_verdict",
        "14_compare_runs",
    ]
    first, second = results[1].run_id, results[2].run_id
    sweep_run, verdict_run, compare_run = results[3].run_dir, results[4].run_dir, results[5].run_dir
    read = lambda run, name: pd.read_parquet(run / "tables" / f"{name}.parquet")  # noqa: E731
    combined = read(verdict_run, "combined_runs")
    qa = combined[combined["notebook"] == "04_rag_vs_graphrag_qa"]
    assert qa[["run_id", "how", "point"]].values.tolist() == [
        [first, "a grid point of this batch", "retrieval.k=2"],
        [second, "a grid point of this batch", "retrieval.k=4"],
    ]
    points = read(verdict_run, "point_verdicts")
    assert points.groupby("point", sort=False)["run_id"].first().to_dict() == {
        "retrieval.k=2": first,
        "retrieval.k=4": second,
    }
    assert set(points["method"]) == {"graph_walk"} and set(points["baseline"]) == {"hybrid"}
    # the first point's verdict is the main one
    main = read(verdict_run, "verdicts")
    at_first = (
        points[points["point"] == "retrieval.k=2"].drop(columns=["point", "run_id"]).reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(at_first, main[at_first.columns], check_dtype=False)
    report = (verdict_run / "report.html").read_text()
    assert "The verdict per grid point" in report and "Grid point retrieval.k=4" in report
    assert_narrated_from_saved_tables(verdict_run)

    # notebook 14 in the batch compares the grid's points on the same questions
    comparisons = read(compare_run, "run_comparisons")
    assert set(comparisons["first_run"]) == {first} and set(comparisons["second_run"]) == {second}
    assert read(compare_run, "settings_differences")["key"].tolist() == ["retrieval.k"]
    assert_narrated_from_saved_tables(compare_run)

    # the sweep report of the grid: the second point against the first, the same deltas as notebook 14's
    differences = read(sweep_run, "reference_differences")
    assert set(differences["first_run"]) == {first} and set(differences["second_run"]) == {second}
    pd.testing.assert_frame_equal(
        differences.drop(columns=["p_holm", "supported", "claim"]),
        comparisons.drop(columns=["p_holm", "supported", "claim"]),
        check_dtype=False,
    )
    assert read(sweep_run, "sweep_points")["retrieval.k"].tolist() == ["2", "4"]
    assert set(read(sweep_run, "best_points")["measure"]) >= {"qa_accuracy", "qa_recall_at_k"}
    assert read(sweep_run, "sweep_heatmap").empty  # one key varied
    assert_narrated_from_saved_tables(sweep_run)
    index = (tmp_path / "out" / "index.html").read_text()
    assert f'Sweep: <a href="{sweep_run.name}/report.html">the sweep report</a>' in index
