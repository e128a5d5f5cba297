"""Which runs `ragtrial compare` reads and when it refuses (`runner.compared_runs`), on output folders of
hand-written run.json files and score tables (no notebook is executed).
"""

from __future__ import annotations

import pytest
from run_folders import QA, write_run

from ragtrial.config.base import ParamsError
from ragtrial.runner.compared_runs import compare_runs


def test_runs_are_named_by_unique_prefix_and_compared_with_their_costs(tmp_path):
    write_run(tmp_path, f"{QA}-aaaa", [0, 0, 1, 1])
    write_run(tmp_path, f"{QA}-bbbb", [1, 1, 1, 0], settings={"retrieval.k": 8})
    compared = compare_runs(tmp_path, [f"{QA}-a", f"{QA}-b"], n_resamples=200)
    assert compared.runs["run_id"].tolist() == [f"{QA}-aaaa", f"{QA}-bbbb"]
    assert compared.settings[["key", "first_value", "second_value"]].values.tolist() == [
        ["retrieval.k", "5", "8"]
    ]
    accuracy = compared.comparisons.set_index("measure").loc["qa_accuracy"]
    assert (accuracy["n"], accuracy["mean_diff"]) == (4, pytest.approx(0.25))
    assert compared.flips["question_id"].tolist() == ["q0", "q1", "q3"]
    costs = compared.costs.set_index("quantity")
    assert costs.loc["prompt_tokens", ["first", "second", "difference"]].tolist() == [400, 400, 0]
    assert "duration_s" not in costs.index  # not recorded: no row made up


def test_a_refusal_names_the_measure_and_its_question_counts_and_unpaired_runs_anyway(tmp_path):
    write_run(tmp_path, f"{QA}-aaaa", [0, 0, 1, 1])
    write_run(tmp_path, f"{QA}-bbbb", [1, 1, 1])
    with pytest.raises(ParamsError) as raised:
        compare_runs(tmp_path, [f"{QA}-aaaa", f"{QA}-bbbb"])
    assert str(raised.value) == (
        f"runs {QA}-aaaa and {QA}-bbbb asked different questions (qa_accuracy: 1 questions only in "
        f"{QA}-aaaa, 0 only in {QA}-bbbb, 3 shared); compare them as independent samples with --unpaired "
        "(compare.unpaired: true)"
    )
    unpaired = compare_runs(tmp_path, [f"{QA}-aaaa", f"{QA}-bbbb"], unpaired=True, n_resamples=200)
    assert set(unpaired.comparisons["test"]) == {"fisher exact", "mann-whitney u"} and unpaired.flips.empty


def test_runs_without_a_shared_measure_have_no_rows_and_bad_targets_are_named(tmp_path):
    write_run(tmp_path, f"{QA}-aaaa", [0, 1])
    write_run(tmp_path, "01_build_index-cccc", [0, 1], notebook="01_build_index")
    write_run(tmp_path, f"{QA}-dddd", [0, 1], status="failed")
    assert compare_runs(tmp_path, [f"{QA}-aaaa", "01_build_index-cccc"]).comparisons.empty
    with pytest.raises(ParamsError, match="2 runs start with it"):
        compare_runs(tmp_path, [QA, "01"])
    with pytest.raises(ParamsError, match="status failed, not completed"):
        compare_runs(tmp_path, [f"{QA}-a", f"{QA}-d"])
    with pytest.raises(ParamsError, match="is named twice"):
        compare_runs(tmp_path, [f"{QA}-a", f"{QA}-aaaa"])
    with pytest.raises(ParamsError, match="give at least two runs, got 1"):
        compare_runs(tmp_path, [f"{QA}-a"])


def test_with_three_runs_each_later_run_is_compared_with_the_first_and_holm_spans_both(tmp_path):
    write_run(tmp_path, f"{QA}-aaaa", [0, 0, 1, 1])
    write_run(tmp_path, f"{QA}-bbbb", [1, 1, 1, 0], settings={"retrieval.k": 8})
    write_run(tmp_path, f"{QA}-cccc", [0, 0, 1, 1], settings={"retrieval.hops": 1})
    compared = compare_runs(tmp_path, [f"{QA}-a", f"{QA}-b", f"{QA}-c"], n_resamples=200)
    assert compared.runs["position"].tolist() == [1, 2, 3]
    pairs = compared.comparisons[["first_run", "second_run"]].drop_duplicates().values.tolist()
    assert pairs == [[f"{QA}-aaaa", f"{QA}-bbbb"], [f"{QA}-aaaa", f"{QA}-cccc"]]
    assert dict(zip(compared.settings["second_run"], compared.settings["key"], strict=True)) == {
        f"{QA}-bbbb": "retrieval.k",
        f"{QA}-cccc": "retrieval.hops",
    }
    # one Holm family over both pairs: the smallest p is multiplied by every row of the table
    rows = compared.comparisons
    smallest = rows["p_value"].idxmin()
    assert rows.loc[smallest, "p_holm"] == pytest.approx(min(1.0, rows.loc[smallest, "p_value"] * len(rows)))
    assert set(compared.costs["second_run"]) == {f"{QA}-bbbb", f"{QA}-cccc"}


def test_runs_of_two_outputs_folders_are_compared_by_id_prefix_or_folder_path(tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    write_run(here, f"{QA}-aaaa", [0, 0, 1, 1])
    write_run(there, f"{QA}-bbbb", [1, 1, 1, 0], settings={"retrieval.k": 8})
    compared = compare_runs([here, there], [f"{QA}-a", f"{QA}-b"], n_resamples=200)
    assert compared.runs["run_id"].tolist() == [f"{QA}-aaaa", f"{QA}-bbbb"]
    assert compared.comparisons.set_index("measure").loc["qa_accuracy", "mean_diff"] == pytest.approx(0.25)
    # a path to a run folder needs no --outputs; the same run id in both folders is told apart by folder
    write_run(there, f"{QA}-aaaa", [1, 1, 1, 1])
    by_path = compare_runs(here, [f"{QA}-aaaa", str(there / f"{QA}-aaaa")], n_resamples=200)
    assert by_path.runs["run_id"].tolist() == [f"here/{QA}-aaaa", f"there/{QA}-aaaa"]
    assert by_path.comparisons.set_index("measure").loc["qa_accuracy", "mean_diff"] == pytest.approx(0.5)
    with pytest.raises(ParamsError) as raised:
        compare_runs([here, there], [f"{QA}-aaaa", f"{QA}-bbbb"])
    assert str(raised.value) == (
        f"{QA}-aaaa: runs in several outputs folders match it {here / (QA + '-aaaa')}, "
        f"{there / (QA + '-aaaa')}; give more of the run id, or the path of its run folder"
    )
    with pytest.raises(ParamsError, match=f"{tmp_path}/nowhere: not a run folder \\(no run.json in it\\)"):
        compare_runs(here, [f"{QA}-aaaa", str(tmp_path / "nowhere")])
