"""Notebook 15 executed on a grid of hand-written runs (no model call): its tables saved as CSV beside
its report, the plots and the heatmap drawn, the seed's rows beside the matching points, and every
number of its prose traced to a saved table.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import PROJECT_ROOT
from run_folders import QA, write_run
from traceable import assert_narrated_from_saved_tables

from ragtrial.config.batch import RunSpec
from ragtrial.config.notebooks import SWEEP_NOTEBOOK
from ragtrial.config.settings import validate_settings
from ragtrial.runner.execute import execute_run

pytestmark = pytest.mark.usefixtures("notebook_kernels")


def test_the_sweep_notebook_reports_a_two_key_grid_with_its_heatmap_and_the_seeds_rows(tmp_path):
    outputs = tmp_path / "out"
    grid = {(5, 1): [0, 0, 1, 1], (5, 2): [1, 1, 1, 0], (8, 1): [1, 1, 1, 1], (8, 2): [0, 0, 0, 1]}
    ids = []
    for n, ((k, hops), accuracy) in enumerate(grid.items()):
        settings = {"retrieval.keyword": "ts_rank", "retrieval.k": k, "retrieval.hops": hops}
        write_run(outputs, f"{QA}-{n}{n}{n}{n}", accuracy, settings=settings, recall=[0.25 * (n % 3)] * 4)
        ids.append(f"{QA}-{n}{n}{n}{n}")
    settings = validate_settings(
        {"sweep": {"runs": ids, "keys": ["retrieval.k", "retrieval.hops"], "bootstrap_resamples": 200}},
        "test",
    )
    result = execute_run(RunSpec(notebook=SWEEP_NOTEBOOK, settings=settings), PROJECT_ROOT, outputs)
    assert result.status == "completed", result.error
    run_dir = result.run_dir
    for name in ("sweep_points", "reference_differences", "sweep_heatmap", "best_points", "point_costs"):
        assert (run_dir / "tables" / f"{name}.csv").is_file(), name
    heatmap = pd.read_csv(run_dir / "tables" / "sweep_heatmap.csv")
    assert len(heatmap[heatmap["measure"] == "qa_accuracy"]) == 4
    seed = pd.read_csv(run_dir / "tables" / "seed_comparison.csv")
    assert set(seed["variation"]) == {"Hybrid, 8 passages instead of 5"}
    report = (run_dir / "report.html").read_text()
    assert report.count("<img") >= 4  # per measure against each key, and the heatmaps
    assert "not the seed's run" in report and "reproduce none of the seed's figures" in report
    assert_narrated_from_saved_tables(run_dir)
