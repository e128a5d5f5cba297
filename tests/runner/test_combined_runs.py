"""Which runs the verdict combines (`runner.combined_runs`), on output folders of hand-written run.json
files (no notebook is executed).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ragtrial.config.base import ParamsError
from ragtrial.config.batch import deep_merge
from ragtrial.config.settings import Settings
from ragtrial.report.index_page import VERDICT_NOTEBOOK
from ragtrial.runner.combined_runs import combine_runs

QA, INDEX, CLAIMS = "04_rag_vs_graphrag_qa", "01_build_index", "08_claims_comprehensiveness_diversity"
OURS = Settings()


def write_run(
    outputs,
    run_id,
    notebook,
    *,
    settings=None,
    status="completed",
    ended_at="2025-01-01T10:00:00+00:00",
    batch=None,
    tables=(),
):
    """A run folder as the runner leaves it: run.json (settings = ours merged with `settings`) and tables."""
    run_dir = outputs / run_id
    (run_dir / "tables").mkdir(parents=True)
    record = {
        "run_id": run_id,
        "notebook": notebook,
        "label": "",
        "status": status,
        "settings": deep_merge(OURS.model_dump(mode="json"), settings or {}),
        "git_commit": "c0ffee",
        "started_at": ended_at,
        "ended_at": ended_at,
        "batch": batch,
    }
    (run_dir / "run.json").write_text(json.dumps(record))
    for name in tables:
        pd.DataFrame({"run": [run_id]}).to_parquet(run_dir / "tables" / f"{name}.parquet")
    return run_dir


def combine(outputs, notebooks=(QA,), run_ids=(), own_run_dir=None):
    return combine_runs(outputs, OURS, list(notebooks), list(run_ids), own_run_dir)


@pytest.mark.parametrize(
    ("theirs", "named"),
    [
        ({"data": {"size": "tiny"}}, 'data set: data.size "tiny" vs "small"'),
        ({"llm": {"model": "other-model"}}, 'model: llm.model "other-model" vs "gemma-3-270m-q4_k_m"'),
        ({"index": {"chunk_size": 300}}, "index: index.chunk_size 300 vs 600"),
        ({"embeddings": {"model": "other-emb"}}, 'index: embeddings.model "other-emb" vs'),
    ],
    ids=["data set", "model", "index", "embeddings"],
)
def test_a_named_run_of_another_data_set_model_or_index_is_refused_by_name(tmp_path, theirs, named):
    write_run(tmp_path, "04-theirs", QA, settings=theirs)
    write_run(tmp_path, "01-ours", INDEX)
    with pytest.raises(ParamsError) as raised:
        combine(tmp_path, notebooks=(INDEX, QA), run_ids=["01-ours", "04-theirs"])
    message = str(raised.value)
    assert message.startswith("key 'verdict.runs': run 04-theirs differs from this verdict's ")
    assert named in message and "01-ours" not in message


def test_the_index_store_folder_is_no_part_of_a_runs_identity(tmp_path):
    write_run(tmp_path, "04-elsewhere", QA, settings={"index": {"store_path": "/elsewhere/indexes"}})
    combined = combine(tmp_path, run_ids=["04-elsewhere"])
    assert combined.runs[["notebook", "run_id", "how"]].values.tolist() == [
        [QA, "04-elsewhere", "named in verdict.runs"]
    ]


@pytest.mark.fault
def test_every_faulty_named_run_is_named_with_why(tmp_path):
    write_run(tmp_path, "04-failed", QA, status="failed")
    write_run(tmp_path, "01-a", INDEX)
    write_run(tmp_path, "01-b", INDEX)
    write_run(
        tmp_path, "08-other", CLAIMS, settings={"data": {"seed": 3}, "llm": {"backend": "openai_compatible"}}
    )
    (tmp_path / "04-broken").mkdir()
    (tmp_path / "04-broken" / "run.json").write_text("{not json")
    with pytest.raises(ParamsError) as raised:
        combine(
            tmp_path,
            notebooks=(INDEX, QA, CLAIMS),
            run_ids=["04-gone", "04-failed", "01-a", "01-b", "04-broken", "08-other"],
        )
    message = str(raised.value)
    assert f"run 04-gone: no such run folder {tmp_path / '04-gone'}" in message
    assert "run 04-failed: status failed, not completed" in message
    assert "runs 01-a and 01-b are both of notebook 01_build_index" in message
    assert f"run 04-broken: {tmp_path / '04-broken' / 'run.json'}: not valid JSON" in message
    assert (
        "run 08-other differs from this verdict's data set: data.seed 3 vs 0 and model: llm.backend "
        '"openai_compatible" vs "embedded"'
    ) in message


def test_a_missing_notebook_is_reported_with_why(tmp_path):
    write_run(tmp_path, "04-ours", QA, tables=["qa_scores"])
    write_run(tmp_path, "08-tiny", CLAIMS, settings={"data": {"size": "tiny"}})
    write_run(tmp_path, "01-failed", INDEX, status="failed")
    combined = combine(tmp_path, notebooks=(INDEX, QA, CLAIMS))
    assert combined.runs["notebook"].tolist() == [QA]
    assert combined.missing.values.tolist() == [
        [INDEX, "no completed run"],
        [CLAIMS, "no run for this data set, model and index (1 runs of other ones)"],
    ]
    assert combined.skipped.values.tolist() == [
        ["01-failed", INDEX, "status failed"],
        ["08-tiny", CLAIMS, 'differs from this verdict\'s data set: data.size "tiny" vs "small"'],
    ]
    assert combined.table(CLAIMS, "claims") is None  # the verdict is restricted to what exists
    assert combined.table(QA, "qa_scores")["run"].tolist() == ["04-ours"]
    with pytest.raises(FileNotFoundError, match="04-ours/tables/qa_answers.parquet"):
        combined.table(QA, "qa_answers")


def test_the_latest_completed_matching_run_is_chosen_by_when_it_ended(tmp_path):
    # folder names and end times in different orders, and one in another time zone
    write_run(tmp_path, "04-a", QA, ended_at="2025-03-01T12:00:00+00:00")
    write_run(tmp_path, "04-b", QA, ended_at="2025-03-01T13:30:00+02:00")  # 11:30 UTC
    write_run(tmp_path, "04-c", QA, ended_at="2025-02-01T12:00:00+00:00")
    write_run(tmp_path, "04-d", QA, ended_at="2025-04-01T12:00:00+00:00", status="failed")
    write_run(tmp_path, "04-e", QA, ended_at="2025-05-01T12:00:00+00:00", settings={"llm": {"model": "m"}})
    combined = combine(tmp_path)
    assert combined.runs[["run_id", "how", "ended_at"]].values.tolist() == [
        ["04-a", "latest matching", "2025-03-01T12:00:00+00:00"]
    ]
    assert combined.run_dir(QA) == tmp_path / "04-a"
    assert combined.settings(QA)["llm"]["model"] == OURS.llm.model
    assert dict(zip(combined.skipped["run_id"], combined.skipped["reason"], strict=True)) == {
        "04-b": "not chosen: 04-a is (latest matching)",
        "04-c": "not chosen: 04-a is (latest matching)",
        "04-d": "status failed",
        "04-e": 'differs from this verdict\'s model: llm.model "m" vs "gemma-3-270m-q4_k_m"',
    }


def test_the_batchs_own_run_is_preferred_over_a_later_one_of_another_batch(tmp_path):
    batch = {"file": "params/default.yaml", "run_ids": ["01-ours", "04-ours", "10-ours"]}
    write_run(tmp_path, "04-ours", QA, ended_at="2025-01-01T10:00:00+00:00", batch=batch)
    write_run(tmp_path, "04-later", QA, ended_at="2025-06-01T10:00:00+00:00", batch={"file": "b.yaml"})
    write_run(tmp_path, "01-later", INDEX, ended_at="2025-06-01T10:00:00+00:00", batch={"file": "b.yaml"})
    write_run(tmp_path, "01-ours", INDEX, status="failed", batch=batch)  # falls through to the latest
    own = write_run(tmp_path, "10-ours", VERDICT_NOTEBOOK, status="running", batch=batch)
    combined = combine(tmp_path, notebooks=(INDEX, QA), own_run_dir=own)
    assert combined.runs[["notebook", "run_id", "how"]].values.tolist() == [
        [INDEX, "01-later", "latest matching"],
        [QA, "04-ours", "this batch"],
    ]
    assert combined.missing.empty


@pytest.mark.fault
def test_a_broken_run_json_is_skipped_naming_the_file(tmp_path):
    write_run(tmp_path, f"{QA}-good", QA)
    for name, text in ((f"{QA}-broken", "{"), (f"{QA}-list", "[1]"), ("00_backend_check-broken", "")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text(text)
    combined = combine(tmp_path)
    assert combined.runs["run_id"].tolist() == [f"{QA}-good"]
    assert combined.skipped.values.tolist() == [
        [
            f"{QA}-broken",
            QA,
            f"{tmp_path / f'{QA}-broken' / 'run.json'}: not valid JSON: Expecting property "
            "name enclosed in double quotes at line 1",
        ],
        [f"{QA}-list", QA, f"{tmp_path / f'{QA}-list' / 'run.json'}: not a JSON object"],
    ]  # the broken run of a notebook the verdict does not read is not its concern


def test_an_upstream_systems_index_build_recorded_by_a_combined_run_becomes_its_own_part(tmp_path):
    from ragtrial.index.costs import COLUMNS, upstream_part_costs
    from ragtrial.methods.registry import index_parts

    build = {
        "folder": "/x/graphrag-1",
        "ledger": {"calls": 10, "cached_calls": 4, "prompt_tokens": 900, "completion_tokens": 100},
        "embedding_tokens": 5000,
        "model_s": 3.5,
        "wall_s": 7.0,
    }
    run_dir = write_run(tmp_path, "04-a", QA)
    record = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**record, "systems": {"graphrag": {"index": build}}}))
    builds = combine(tmp_path).upstream_builds()
    assert builds == {"graphrag": build}
    parts = upstream_part_costs(builds)
    assert list(parts.columns) == COLUMNS
    row = parts.iloc[0]
    assert (row["part"], row["calls"], row["live_calls"], row["embedding_tokens"]) == (
        "upstream:graphrag",
        10,
        6,
        5000,
    )
    # the methods of that system read that part and nothing of the kit's index
    assert index_parts("graphrag_local", OURS) == [("upstream:graphrag", "")]
    assert index_parts("lightrag_hku_mix", OURS) == [("upstream:lightrag", "")]


def labelled(outputs, run_id, label, settings, batch=None):
    run_dir = write_run(outputs, run_id, QA, settings=settings, batch=batch)
    record = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps(record | {"label": label}))
    return run_dir


def test_verdict_runs_naming_a_grids_label_reads_every_point_and_a_points_label_that_point(tmp_path):
    labelled(tmp_path, "04-k2", "k sweep", {"retrieval": {"k": 2}})
    labelled(tmp_path, "04-k8", "k sweep", {"retrieval": {"k": 8}})
    labelled(tmp_path, "04-hub", "retrieval.hub_degree_cap=20", {"retrieval": {"hub_degree_cap": 20}})
    write_run(tmp_path, "01-a", INDEX)
    grid = combine(tmp_path, notebooks=(INDEX, QA), run_ids=["01-a", "k sweep"])
    assert grid.runs[["notebook", "run_id", "how", "point"]].values.tolist() == [
        [INDEX, "01-a", "named in verdict.runs", ""],
        [QA, "04-k2", "a grid point named in verdict.runs", "k sweep"],
        [QA, "04-k8", "a grid point named in verdict.runs", "retrieval.k=8"],
    ]
    assert grid.run_dir(QA) == tmp_path / "04-k2"  # the sections before the per-point verdict read the first
    points = grid.point_inputs()
    assert [(name, run_id) for name, run_id, _ in points] == [
        ("k sweep", "04-k2"),
        ("retrieval.k=8", "04-k8"),
    ]
    assert all(inputs.notebooks == {INDEX, QA} for _, _, inputs in points)
    assert points[1][2].settings_of(QA).retrieval.k == 8 and points[1][2].settings_of(INDEX).retrieval.k != 8

    point = combine(tmp_path, notebooks=(QA,), run_ids=["retrieval.hub_degree_cap=20"])
    assert point.runs["run_id"].tolist() == ["04-hub"] and not point.points and point.point_inputs() == []
    with pytest.raises(
        ParamsError,
        match="run no such label: no such run folder .*, and no run the verdict reads is labelled",
    ):
        combine(tmp_path, notebooks=(QA,), run_ids=["no such label"])


def test_a_batch_holding_a_grid_of_an_input_notebook_is_read_point_by_point(tmp_path):
    batch = {"file": "params/x.yaml", "run_ids": ["04-k5", "04-k2", "10-ours"]}
    labelled(tmp_path, "04-k2", "retrieval.k=2", {"retrieval": {"k": 2}}, batch=batch)
    labelled(tmp_path, "04-k5", "retrieval.k=5", {"retrieval": {"k": 5}}, batch=batch)
    write_run(tmp_path, "04-elsewhere", QA, ended_at="2025-09-01T10:00:00+00:00")
    own = write_run(tmp_path, "10-ours", VERDICT_NOTEBOOK, status="running", batch=batch)
    combined = combine(tmp_path, own_run_dir=own)
    # in batch order, not by when each ended; the first point named by its label
    assert combined.runs[["run_id", "how", "point"]].values.tolist() == [
        ["04-k5", "a grid point of this batch", "retrieval.k=5"],
        ["04-k2", "a grid point of this batch", "retrieval.k=2"],
    ]
    assert combined.skipped.values.tolist() == [
        ["04-elsewhere", QA, "not chosen: this batch's runs of it are a grid, read point by point"]
    ]
