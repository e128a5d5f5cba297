"""`ragtrial compare` end to end: two runs of notebook 04 against the scripted server that differ in
one retrieval setting, compared by prefix: the settings diff and the paired deltas printed, notebook
14's tables and report written and its prose traced to them; runs that asked other questions refused
in one line naming the key, and compared with `--unpaired`; a run of another outputs folder compared by
prefix (`--outputs` twice) or by the path of its run folder.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from conftest import PROJECT_ROOT, cited_answer_reply, endpoint_settings, run_default_notebooks
from traceable import assert_narrated_from_saved_tables

from ragtrial.cli import main
from ragtrial.config.batch import deep_merge

pytestmark = [pytest.mark.usefixtures("notebook_kernels"), pytest.mark.slow]

QA = {"methods": ["naive_rag", "bm25"], "questions_per_type": 2, "bootstrap_resamples": 200}


def test_compare_prints_the_settings_diff_and_paired_deltas_and_refuses_other_questions(
    scripted, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(PROJECT_ROOT)
    scripted.default_reply = cited_answer_reply
    base = endpoint_settings(scripted.base_url, tmp_path, index={"graph_source": "nlp"}, qa=QA)
    (first,) = run_default_notebooks(
        deep_merge(base, {"retrieval": {"k": 2}}), tmp_path, "04_rag_vs_graphrag_qa"
    )
    (second,) = run_default_notebooks(
        deep_merge(base, {"retrieval": {"k": 5}}), tmp_path, "04_rag_vs_graphrag_qa"
    )
    outputs = tmp_path / "out"
    capsys.readouterr()

    prefix = second.run_id[: len("04_rag_vs_graphrag_qa-") + 4]
    assert main(["compare", first.run_id, prefix, "--outputs", str(outputs)]) == 0
    printed = capsys.readouterr().out
    assert "retrieval.k" in printed and "qa_accuracy" in printed and "qa_recall_at_k" in printed
    assert "exact binomial" in printed or "none: no discordant pairs" in printed
    assert "prompt_tokens" in printed
    (compare_run,) = [p.parent for p in outputs.glob("14_compare_runs-*/run.json")]
    tables = compare_run / "tables"
    differing = pd.read_parquet(tables / "settings_differences.parquet")
    assert (tables / "run_comparisons.csv").is_file()
    assert differing[["key", "first_value", "second_value"]].values.tolist() == [["retrieval.k", "2", "5"]]
    comparisons = pd.read_parquet(tables / "run_comparisons.parquet")
    assert set(comparisons["method"]) == {"naive_rag", "bm25"}
    assert (comparisons["first_run"] == first.run_id).all() and (
        comparisons["second_run"] == second.run_id
    ).all()
    assert (comparisons["pairing"] == "paired").all()
    # the deltas are those of the runs' own saved scores, paired question by question
    ours = pd.read_parquet(first.run_dir / "tables" / "scores.parquet").set_index(["question_id", "method"])
    theirs = pd.read_parquet(second.run_dir / "tables" / "scores.parquet").set_index(
        ["question_id", "method"]
    )
    f1 = comparisons[(comparisons["measure"] == "qa_f1") & (comparisons["method"] == "bm25")].iloc[0]
    both = (theirs["f1"] - ours["f1"]).xs("bm25", level="method").dropna()
    assert f1["n"] == len(both) and f1["mean_diff"] == pytest.approx(both.mean())
    costs = pd.read_parquet(tables / "cost_deltas.parquet").set_index("quantity")
    assert (
        costs.loc["prompt_tokens", "first"]
        == json.loads((first.run_dir / "run.json").read_text())["ledger"]["prompt_tokens"]
    )
    assert (compare_run / "report.html").is_file()
    assert_narrated_from_saved_tables(compare_run)

    # a run of another data set: refused in one line naming the key, before any notebook runs
    other = outputs / f"{second.run_id[:-4]}ffff"
    shutil.copytree(second.run_dir, other)
    record = json.loads((other / "run.json").read_text())
    record["run_id"] = other.name
    record["settings"]["data"]["seed"] = 99
    (other / "run.json").write_text(json.dumps(record))
    assert main(["compare", first.run_id, other.name, "--outputs", str(outputs)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "data.seed 0 vs 99" in error and "--unpaired" in error
    assert main(["compare", first.run_id, other.name, "--outputs", str(outputs), "--unpaired"]) == 0
    assert "fisher exact" in capsys.readouterr().out

    # a run of another outputs folder: named by a prefix with both folders given, or by its folder's path
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.move(second.run_dir, elsewhere / second.run_id)
    for named in (
        [second.run_id[:-1], "--outputs", str(outputs), "--outputs", str(elsewhere)],
        [str(elsewhere / second.run_id), "--outputs", str(outputs)],
    ):
        assert main(["compare", first.run_id, *named]) == 0
        assert "retrieval.k" in capsys.readouterr().out
        latest = max(outputs.glob("14_compare_runs-*/run.json"), key=lambda p: p.stat().st_mtime).parent
        compared = pd.read_parquet(latest / "tables" / "run_comparisons.parquet")
        assert set(compared["second_run"]) == {second.run_id}
        assert compared.set_index(["measure", "method"]).loc[("qa_f1", "bm25"), "mean_diff"] == pytest.approx(
            f1["mean_diff"]
        )


def test_notebook_14_in_a_batch_without_two_runs_to_compare_says_so(scripted, tmp_path):
    (result,) = run_default_notebooks(
        endpoint_settings(scripted.base_url, tmp_path), tmp_path, "14_compare_runs"
    )
    assert result.summary["llm_calls_live"] == 0
    headline = (result.run_dir / "headline.txt").read_text()
    assert headline.startswith("Fewer than two runs to compare (0 found)")
    assert_narrated_from_saved_tables(result.run_dir)
