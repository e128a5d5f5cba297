"""The sweep report's tables (`runner.sweep_runs.read_sweep`, `evaluation.sweep`) on output folders of
hand-written runs (no notebook is executed): a grid over two keys, its paired differences and intervals
against values computed here by hand, the heatmap, the best point against the runner-up, the cost per
point, the seed's rows beside the matching points, and the refusals naming the key.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import yaml
from conftest import PROJECT_ROOT, batch_runs
from run_folders import QA, write_run

from ragtrial.config.base import ParamsError
from ragtrial.config.notebooks import SWEEP_NOTEBOOK
from ragtrial.config.sweep import SweepSettings
from ragtrial.evaluation.published_figures import read_published
from ragtrial.runner.sweep_runs import read_sweep

RESAMPLES = 400
FIXED = {"retrieval.keyword": "ts_rank"}  # the seed's keyword scorer at every point
# (k, hops) -> accuracy of questions q0..q3 (hybrid); the first point is the reference
GRID = {
    (5, 1): [0, 0, 1, 1],
    (5, 2): [1, 1, 1, 0],
    (8, 1): [1, 1, 1, 1],
    (8, 2): [0, 0, 0, 1],
}
RECALL = {(5, 1): [0.2, 0.4, 0.6, 0.8], (5, 2): [0.4, 0.4, 0.6, 0.8], (8, 1): [0.2, 0.4, 0.6, 0.8]}


def interval(values, resamples=RESAMPLES):
    """The percentile bootstrap interval of the mean, resampling questions (numpy's generator, seed 0)."""
    values = np.asarray(values, float)
    rng = np.random.default_rng(0)
    means = values[rng.integers(0, values.size, size=(resamples, values.size))].mean(axis=1)
    return tuple(np.quantile(means, [0.025, 0.975]))


def holm(p_values):
    """Holm's step-down adjustment, by hand."""
    order = np.argsort(p_values)
    adjusted, running = np.empty(len(p_values)), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, p_values[i] * (len(p_values) - rank)))
        adjusted[i] = running
    return adjusted


@pytest.fixture
def grid(tmp_path):
    ids = []
    for n, ((k, hops), accuracy) in enumerate(GRID.items()):
        run_id = f"{QA}-{n}{n}{n}{n}"
        settings = FIXED | {"retrieval.k": k, "retrieval.hops": hops}
        write_run(tmp_path, run_id, accuracy, settings=settings, recall=RECALL.get((k, hops), [0.5] * 4))
        ids.append(run_id)
    return tmp_path, ids


def test_a_sweep_over_two_keys_pairs_every_point_with_the_first_and_maps_both_keys(grid):
    outputs, ids = grid
    settings = SweepSettings(runs=ids, keys=["retrieval.k", "retrieval.hops"], bootstrap_resamples=RESAMPLES)
    sweep = read_sweep(outputs, ids, settings)

    assert sweep.points[["run_id", "retrieval.k", "retrieval.hops", "reference"]].values.tolist() == [
        [ids[0], "5", "1", True],
        [ids[1], "5", "2", False],
        [ids[2], "8", "1", False],
        [ids[3], "8", "2", False],
    ]
    accuracy = sweep.differences[sweep.differences["measure"] == "qa_accuracy"].set_index("second_run")
    reference = np.array(GRID[(5, 1)], float)
    for run_id, key in zip(ids[1:], list(GRID)[1:], strict=True):
        differences = np.array(GRID[key], float) - reference
        row = accuracy.loc[run_id]
        assert (row["first_run"], row["n"]) == (ids[0], 4)
        assert row["mean_diff"] == pytest.approx(differences.mean())
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(interval(differences))
    # McNemar, exact: (8, 1) is right on q0 and q1 where the reference was wrong, never the reverse
    assert accuracy.loc[ids[2], "p_value"] == pytest.approx(2 * 0.5**2)
    table = sweep.differences
    assert table["p_holm"].to_numpy() == pytest.approx(holm(table["p_value"].to_numpy()))
    assert not table["supported"].any()  # four questions cannot support a claim

    means = sweep.means.set_index(["run_id", "measure"])
    assert means.loc[(ids[2], "qa_accuracy"), "mean"] == 1.0
    assert (means.loc[(ids[0], "qa_recall_at_k"), ["ci_low", "ci_high"]].tolist()) == pytest.approx(
        interval(RECALL[(5, 1)])
    )

    # the heatmap: one cell per (k, hops), the point's mean and its difference to the reference
    assert sweep.heatmap_keys == ("retrieval.k", "retrieval.hops")
    cells = sweep.heatmap[sweep.heatmap["measure"] == "qa_accuracy"]
    assert cells[["x_value", "y_value", "points", "mean", "mean_diff"]].values.tolist() == [
        ["5", "1", 1, 0.5, 0.0],
        ["5", "2", 1, 0.75, 0.25],
        ["8", "1", 1, 1.0, 0.5],
        ["8", "2", 1, 0.25, -0.25],
    ]

    # the best accuracy, (8, 1), against the runner-up (5, 2) on the same questions
    best = sweep.best.set_index("measure").loc["qa_accuracy"]
    assert (best["best_run"], best["runner_up_run"], best["points"]) == (ids[2], ids[1], 4)
    assert best["mean_diff"] == pytest.approx(0.25)
    assert (best["ci_low"], best["ci_high"]) == pytest.approx(interval([0, 0, 0, 1]))
    assert best["p_value"] == pytest.approx(1.0) and not best["distinguishable"]
    assert "no claim" in best["claim"]

    # cost per point, from each run.json's ledger
    assert sweep.costs.set_index("run_id")["prompt_tokens"].tolist() == [400.0] * 4


def test_the_seeds_rows_stand_beside_the_points_with_the_same_settings(grid):
    outputs, ids = grid
    sweep = read_sweep(outputs, ids, SweepSettings(bootstrap_resamples=RESAMPLES))
    # of seed 001's rows, only hybrid's 8 passages against 5 (at 2 hops, no cap, ts_rank) were run here
    seed = sweep.seed.set_index("kit_measure")
    assert set(seed["variation"]) == {"Hybrid, 8 passages instead of 5"}
    accuracy = seed.loc["qa_accuracy"]
    assert (accuracy["kit_base_run"], accuracy["kit_run"]) == (ids[1], ids[3])
    assert (accuracy["published_base"], accuracy["published"]) == pytest.approx((0.28, 0.33))
    assert accuracy["kit_difference"] == pytest.approx(0.25 - 0.75)
    assert not accuracy["same_direction"]  # the seed's +5 points, the kit's -0.5 here
    assert seed.loc["qa_recall_at_k", "source"].endswith(
        "seed 001 (the shared article text), What Else Changed the Outcome, "
        "row 'Hybrid, 8 passages instead of 5'"
    )
    # found from the points when not given, in the order the differences to the first point name them
    assert sweep.keys == ["retrieval.hops", "retrieval.k"]


def test_refusals_name_the_key_or_the_points(grid, tmp_path):
    outputs, ids = grid
    with pytest.raises(ParamsError) as raised:
        read_sweep(outputs, ids, SweepSettings(heatmap=["retrieval.k", "retrieval.hub_degree_cap"]))
    assert str(raised.value) == (
        "key 'sweep.heatmap': retrieval.hub_degree_cap did not vary in the sweep (varied: retrieval.hops, "
        "retrieval.k)"
    )
    with pytest.raises(ParamsError, match=r"key 'sweep.keys': retrieval.nope is not a setting"):
        read_sweep(outputs, ids, SweepSettings(keys=["retrieval.nope"]))
    write_run(outputs, f"{QA}-9999", [1, 0, 1], settings=FIXED | {"data.seed": 7})
    with pytest.raises(ParamsError) as raised:
        read_sweep(outputs, [ids[0], f"{QA}-9999"], SweepSettings())
    assert str(raised.value) == (
        f"sweep: points {ids[0]} and {QA}-9999 asked different questions (data.seed 0 vs 7); a sweep pairs "
        "its points on the same questions"
    )


def test_a_point_that_did_not_complete_is_listed_and_left_out(grid):
    outputs, ids = grid
    write_run(outputs, f"{QA}-ffff", [1, 1, 1, 1], settings=FIXED | {"retrieval.k": 9}, status="failed")
    targets = [f"{QA}-ffff", *ids[:2], f"{QA}-eeee"]  # the last never ran: no folder
    sweep = read_sweep(outputs, targets, SweepSettings(bootstrap_resamples=RESAMPLES))
    assert sweep.points[["run_id", "status", "reference", "retrieval.k"]].values.tolist() == [
        [f"{QA}-ffff", "failed", False, "9"],
        [ids[0], "completed", True, "5"],
        [ids[1], "completed", False, "5"],
        [f"{QA}-eeee", "not run", False, "(absent)"],
    ]
    assert set(sweep.differences["second_run"]) == {ids[1]}


def test_the_sweep_of_params_variations_sets_every_seed_row_beside_its_points(tmp_path):
    specs = batch_runs("params/variations.yaml")
    (sweep_spec,) = [s for s in specs if s.notebook == SWEEP_NOTEBOOK]
    points = [s for s in specs if s.run_id in sweep_spec.settings.sweep.runs]
    assert [s.run_id for s in points] == sweep_spec.settings.sweep.runs and len(points) == 16
    for n, spec in enumerate(points):
        write_run(
            tmp_path,
            spec.run_id,
            [n % 2, 1, 0, (n // 2) % 2],
            recorded=spec.settings.model_dump(mode="json"),
            methods=("hybrid", "graph_hybrid"),
        )
    settings = sweep_spec.settings.sweep.model_copy(update={"bootstrap_resamples": RESAMPLES})
    sweep = read_sweep(tmp_path, settings.runs, settings)
    assert sweep.keys == [
        "retrieval.hops",
        "retrieval.k",
        "retrieval.hub_degree_cap",
        "retrieval.keyword",
    ]
    assert sweep.heatmap_keys is None  # four keys vary and none are named
    published = read_published("seed001_variations.csv")
    compared = published[published["compared_with"] != ""]
    # every seed row that changes one setting stands beside the kit's two points with those settings
    assert sorted(zip(sweep.seed["variation"], sweep.seed["kit_measure"], strict=True)) == sorted(
        zip(compared["variation"], compared["kit_measure"], strict=True)
    )
    one_hop = sweep.seed[sweep.seed["variation"] == "Graph + hybrid, 1 hop"].set_index("kit_measure")
    kit = {s.run_id: s.settings.retrieval for s in points}
    base, run = kit[one_hop.loc["qa_accuracy", "kit_base_run"]], kit[one_hop.loc["qa_accuracy", "kit_run"]]
    assert (base.hops, base.k, base.hub_degree_cap, base.keyword) == (2, 5, None, "ts_rank")
    assert (run.hops, run.k, run.hub_degree_cap, run.keyword) == (1, 5, None, "ts_rank")
    assert one_hop.loc["qa_accuracy", "published_difference"] == pytest.approx(0.36 - 0.42)
    assert one_hop.loc["qa_accuracy", "source"].endswith(
        "What Else Changed the Outcome, row 'Graph + hybrid, 1 hop'"
    )


def test_on_several_threads_the_sweep_starts_once_its_points_have_ended(tmp_path, monkeypatch):
    from ragtrial.runner import batch as batch_module
    from ragtrial.runner.execute import RunResult

    events: list[tuple[str, str]] = []

    def execute(spec, root, outputs, on_start=None, **options):
        events.append(("start", spec.notebook))
        if spec.notebook != SWEEP_NOTEBOOK:
            time.sleep(0.3)  # the points outlast the picking of the sweep by the free worker
        events.append(("end", spec.notebook))
        return RunResult(spec.run_id, spec.notebook, "completed", outputs / spec.run_id, {})

    monkeypatch.setattr(batch_module, "execute_run", execute)
    path = tmp_path / "grid.yaml"
    path.write_text(
        yaml.safe_dump({"runs": [{"notebook": "00_backend_check", "grid": {"llm.seed": [1, 2, 3]}}]})
    )
    results = batch_module.run_batch(
        path, root=PROJECT_ROOT, outputs=tmp_path / "out", workers=2, log=lambda _: None
    )
    assert [r.notebook for r in results] == ["00_backend_check"] * 3 + [SWEEP_NOTEBOOK]
    started = events.index(("start", SWEEP_NOTEBOOK))
    assert [e for e in events[:started] if e[0] == "end"] == [("end", "00_backend_check")] * 3
