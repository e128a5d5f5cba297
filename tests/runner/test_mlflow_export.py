"""`ragtrial export mlflow` and `ragtrial run --mlflow` (`runner.mlflow_export`): finished run folders
(hand-written run.json, tables, report and ledger) logged to MLflow's local SQLite and file stores and to
a real `mlflow server`, read back through the MLflow client; a second export updates, never duplicates;
no planted secret reaches the store.
"""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH
from postgres_server import free_port

from ragtrial.cli import main
from ragtrial.config.base import ParamsError
from ragtrial.config.settings import Settings
from ragtrial.llm.ledger import CallRecord, calls_frame
from ragtrial.redact import MASK
from ragtrial.runner.mlflow_export import (
    RUN_ID_TAG,
    TRUNCATED_TAG,
    TRUNCATION_MARK,
    MlflowExport,
    TrackingUnreachable,
    summary_metrics,
)

QA = "04_rag_vs_graphrag_qa"


def write_run(outputs, run_id, f1=(0.5, 0.25), *, settings=None, commit="abc123", label="k=5"):
    """A completed run folder of notebook 04: run.json, a wide `summary` table (per method F1 and
    recall@5 with intervals), a long `by_question_type` table, report.html, ledger.csv.
    """
    run_dir = outputs / run_id
    (run_dir / "tables").mkdir(parents=True)
    recorded = Settings().model_dump(mode="json")
    for key, value in (settings or {}).items():
        section, name = key.split(".")
        recorded[section][name] = value
    record = {
        "run_id": run_id,
        "notebook": QA,
        "label": label,
        "status": "completed",
        "settings": recorded,
        "git_commit": commit,
        "started_at": "2026-12-06T09:00:00+00:00",
        "ended_at": "2026-12-06T09:01:30+00:00",
        "duration_s": 90.0,
        "headline": "hybrid answers better",
        "prompts": ["answer@v2"],
        "served_models": ["scripted-1"],
        "ledger": {"prompt_tokens": 400, "llm_calls_live": 2},
        "batch": {"file": "params/variations.yaml", "run_ids": [run_id]},
    }
    (run_dir / "run.json").write_text(json.dumps(record))
    summary = pd.DataFrame(
        {
            "method": ["hybrid", "naive_rag"],
            "questions": [4, 4],
            "failures": [0, 1],
            "f1": list(f1),
            "f1_low": [f - 0.1 for f in f1],
            "f1_high": [f + 0.1 for f in f1],
            "f1_n": [4, 3],
            "recall@5": [0.75, float("nan")],
            "recall@5_low": [0.5, float("nan")],
            "recall@5_high": [1.0, float("nan")],
        }
    )
    by_type = pd.DataFrame(
        {
            "method": ["hybrid", "hybrid"],
            "question_type": ["single_hop", "multi_hop"],
            "n": [2, 2],
            "mean": [0.6, 0.4],
            "ci_low": [0.2, 0.0],
            "ci_high": [1.0, 0.8],
            "metric": ["f1", "f1"],
        }
    )
    for name, table in (("summary", summary), ("by_question_type", by_type)):
        table.to_parquet(run_dir / "tables" / f"{name}.parquet")
        table.to_csv(run_dir / "tables" / f"{name}.csv", index=False)
    (run_dir / "report.html").write_text(f"<html><body>{QA} · run {run_id}</body></html>")
    calls = [
        CallRecord(
            run_id, "completion", "answer", "hybrid", "scripted", "answer@v2", 0, False, 100, 10, 0.5, 1, ""
        )
        for _ in range(2)
    ]
    calls_frame(calls).to_csv(run_dir / "ledger.csv", index=False)
    return run_dir


def read_back(uri, experiment="ragtrial"):
    """The active MLflow runs of the experiment, by their ragtrial run id."""
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    runs = client.search_runs([found.experiment_id]) if found else []
    return client, {run.data.tags[RUN_ID_TAG]: run for run in runs}


def artifact_paths(client, run_id, path=None):
    paths = []
    for item in client.list_artifacts(run_id, path):
        paths += artifact_paths(client, run_id, item.path) if item.is_dir else [item.path]
    return sorted(paths)


def test_summary_metrics_name_each_mean_and_interval_end_per_method():
    wide = pd.DataFrame(
        {
            "method": ["hybrid", "naive/rag"],
            "f1": [0.5, 0.25],
            "f1_low": [0.4, float("nan")],
            "f1_high": [0.6, 0.3],
        }
    )
    long = pd.DataFrame(
        {
            "method": ["hybrid", "hybrid", "hybrid"],
            "question_type": ["single_hop", "multi_hop", "multi_hop"],
            "mean_diff": [0.1, 0.2, 0.3],
            "ci_low": [0.0, 0.1, 0.2],
            "ci_high": [0.2, 0.3, 0.4],
        }
    )
    no_method = pd.DataFrame({"measure": ["x"], "mean": [1.0], "ci_low": [0.0], "ci_high": [2.0]})
    by_subset = pd.DataFrame(
        {
            "method": ["hybrid", "hybrid"],
            "baseline": ["naive_rag", "naive_rag"],
            "metric": ["recall@5", "recall@5"],
            "subset": ["all", "no fallback"],
            "mean_diff": [0.25, 0.5],
            "ci_low": [0.0, 0.1],
            "ci_high": [0.5, 0.9],
        }
    )
    metrics = summary_metrics({"summary": wide, "paired": long, "findings": no_method, "by": by_subset})
    assert metrics == {
        "summary/hybrid/f1": 0.5,
        "summary/hybrid/f1_low": 0.4,
        "summary/hybrid/f1_high": 0.6,
        "summary/naive_rag/f1": 0.25,  # no low end: an undefined interval end is not made up
        "summary/naive_rag/f1_high": 0.3,
        # the two multi_hop rows share their name: left out, as no metric could say which row it is
        "paired/hybrid/single_hop/mean_diff": 0.1,
        "paired/hybrid/single_hop/mean_diff_low": 0.0,
        "paired/hybrid/single_hop/mean_diff_high": 0.2,
        # named by method, baseline, subset, then the metric column's value
        "by/hybrid/naive_rag/all/recall_at_5": 0.25,
        "by/hybrid/naive_rag/all/recall_at_5_low": 0.0,
        "by/hybrid/naive_rag/all/recall_at_5_high": 0.5,
        "by/hybrid/naive_rag/no fallback/recall_at_5": 0.5,
        "by/hybrid/naive_rag/no fallback/recall_at_5_low": 0.1,
        "by/hybrid/naive_rag/no fallback/recall_at_5_high": 0.9,
    }


@pytest.mark.parametrize("store", ["sqlite", "file"])
def test_runs_export_to_a_local_store_and_read_back_through_the_client(tmp_path, store, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 refuses its file store unless asked
    outputs = tmp_path / "outputs"
    write_run(outputs, f"{QA}-aaaa")
    write_run(outputs, f"{QA}-bbbb", f1=(0.75, 0.25), settings={"retrieval.k": 8}, label="k=8")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}" if store == "sqlite" else (tmp_path / "mlruns").as_uri()
    assert main(["export", "mlflow", "--outputs", str(outputs), "--tracking-uri", uri]) == 0
    client, runs = read_back(uri)
    assert sorted(runs) == [f"{QA}-aaaa", f"{QA}-bbbb"]
    run = runs[f"{QA}-bbbb"]
    params, metrics, tags = run.data.params, run.data.metrics, run.data.tags
    assert (params["retrieval.k"], runs[f"{QA}-aaaa"].data.params["retrieval.k"]) == ("8", "5")
    assert params["ragtrial.git_commit"] == "abc123" and params["ragtrial.prompts"] == "answer@v2"
    assert params["ragtrial.model"] == f"{Settings().llm.model} ({Settings().llm.backend})"
    assert params["data.dataset"] == Settings().data.dataset
    assert metrics["summary/hybrid/f1"] == 0.75
    assert (metrics["summary/hybrid/f1_low"], metrics["summary/hybrid/f1_high"]) == pytest.approx(
        (0.65, 0.85)
    )
    assert metrics["summary/hybrid/recall_at_5"] == 0.75 and "summary/naive_rag/recall_at_5" not in metrics
    assert metrics["by_question_type/hybrid/multi_hop/f1_high"] == 0.8
    assert metrics["cost/prompt_tokens"] == 400 and metrics["cost/latency_mean_s"] == 0.5
    assert tags["ragtrial.notebook"] == QA and tags["ragtrial.batch"] == "params/variations.yaml"
    assert (tags["ragtrial.embedded"], tags["ragtrial.label"], tags["mlflow.runName"]) == (
        "true" if Settings().llm.backend == "embedded" else "false",
        "k=8",
        f"{QA}-bbbb",
    )
    assert run.info.status == "FINISHED" and run.info.end_time - run.info.start_time == 90_000
    assert artifact_paths(client, run.info.run_id) == [
        "ledger.csv",
        "report.html",
        "run.json",
        "tables/by_question_type.csv",
        "tables/summary.csv",
    ]
    downloaded = client.download_artifacts(run.info.run_id, "run.json", str(tmp_path))
    assert json.loads(open(downloaded).read())["settings"]["retrieval"]["k"] == 8


def test_a_second_export_updates_the_run_and_a_changed_param_replaces_it(tmp_path):
    outputs, uri = tmp_path / "outputs", f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_dir = write_run(outputs, f"{QA}-aaaa")
    tracking = MlflowExport(uri)
    first = tracking.export(tracking_record(run_dir))
    # the run re-run to other scores at the same commit: the same MLflow run, its metrics updated
    write_summary_f1(run_dir, 0.9)
    second = tracking.export(tracking_record(run_dir))
    assert (first.action, second.action) == ("created", "updated")
    assert second.mlflow_run_id == first.mlflow_run_id
    _, runs = read_back(uri)
    assert list(runs) == [f"{QA}-aaaa"] and runs[f"{QA}-aaaa"].data.metrics["summary/hybrid/f1"] == 0.9
    # re-run at another commit: MLflow's params cannot change, so the old MLflow run gives way to one new
    record = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps(record | {"git_commit": "def456"}))
    third = tracking.export(tracking_record(run_dir))
    _, runs = read_back(uri)
    assert third.action == "replaced" and list(runs) == [f"{QA}-aaaa"]
    assert runs[f"{QA}-aaaa"].info.run_id == third.mlflow_run_id != first.mlflow_run_id
    assert runs[f"{QA}-aaaa"].data.params["ragtrial.git_commit"] == "def456"


def tracking_record(run_dir):
    from ragtrial.report.index_page import read_run_record

    return read_run_record(run_dir)


def write_summary_f1(run_dir, value):
    path = run_dir / "tables" / "summary.parquet"
    table = pd.read_parquet(path)
    table.loc[0, "f1"] = value
    table.to_parquet(path)


@pytest.mark.fault
def test_no_planted_secret_reaches_the_store(tmp_path, monkeypatch):
    key, password = "sk-planted-0123456789abcdef", "pg-planted-secret"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("RAGTRIAL_TEST_DB_PASSWORD", password)
    outputs = tmp_path / "outputs"
    run_dir = write_run(
        outputs,
        f"{QA}-aaaa",
        settings={
            "llm.model": f"model-{key}",  # a key pasted into a setting
            "llm.base_url": f"https://user:{password}@models.example/v1",  # a password in a URL
            "cache.password_env": "RAGTRIAL_TEST_DB_PASSWORD",
        },
        label=f"run with {key}",
    )
    (run_dir / "report.html").write_text(f"<html>Bearer {key} and {password}</html>")
    table = pd.DataFrame({"method": [f"m-{key}"], "f1": [0.5], "f1_low": [0.4], "f1_high": [0.6]})
    table.to_parquet(run_dir / "tables" / "leaky.parquet")
    table.to_csv(run_dir / "tables" / "leaky.csv", index=False)
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    (tmp_path / "store").mkdir()
    assert main(["export", "mlflow", "--outputs", str(outputs), "--tracking-uri", uri]) == 0
    client, runs = read_back(uri)
    run = runs[f"{QA}-aaaa"]
    assert run.data.params["llm.model"] == f"model-{MASK}" and "summary/hybrid/f1" in run.data.metrics
    stored = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    assert any(p.suffix == ".html" for p in stored) and any(p.name == "leaky.csv" for p in stored)
    for path in stored:
        content = path.read_bytes()
        assert key.encode() not in content and password.encode() not in content, path


def test_a_value_over_mlflows_limit_is_cut_marked_and_named(tmp_path):
    outputs, uri = tmp_path / "outputs", f"sqlite:///{tmp_path / 'mlflow.db'}"
    long_path = "corpus/" + "x" * (MAX_PARAM_VAL_LENGTH + 100)
    run_dir = write_run(outputs, f"{QA}-aaaa", settings={"data.path": long_path})
    done = MlflowExport(uri).export(tracking_record(run_dir))
    assert done.truncated == ("data.path", "ragtrial.data")  # the data set's label names its folder
    client, runs = read_back(uri)
    run = runs[f"{QA}-aaaa"]
    value = run.data.params["data.path"]
    assert len(value) == MAX_PARAM_VAL_LENGTH and value.endswith(TRUNCATION_MARK)
    assert run.data.tags[TRUNCATED_TAG] == "data.path, ragtrial.data"
    whole = json.loads(open(client.download_artifacts(run.info.run_id, "run.json", str(tmp_path))).read())
    assert whole["settings"]["data"]["path"] == long_path


def test_runs_are_named_by_prefix_or_batch_and_a_dead_uri_or_missing_extra_is_one_line(
    tmp_path, capsys, monkeypatch
):
    outputs = tmp_path / "outputs"
    write_run(outputs, f"{QA}-aaaa")
    write_run(outputs, f"{QA}-bbbb")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert main(["export", "mlflow", f"{QA}-b", "--outputs", str(outputs), "--tracking-uri", uri]) == 0
    assert list(read_back(uri)[1]) == [f"{QA}-bbbb"]
    assert (
        main(["export", "mlflow", "--batch", "variations", "--outputs", str(outputs), "--tracking-uri", uri])
        == 0
    )
    assert sorted(read_back(uri)[1]) == [f"{QA}-aaaa", f"{QA}-bbbb"]  # bbbb updated, not added again
    capsys.readouterr()
    assert main(["export", "mlflow", QA, "--outputs", str(outputs), "--tracking-uri", uri]) == 2
    assert "2 runs start with it" in capsys.readouterr().err

    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(TrackingUnreachable, match=f"MLflow tracking URI {dead} does not answer"):
        MlflowExport(dead)
    assert main(["export", "mlflow", "--outputs", str(outputs), "--tracking-uri", dead]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: MLflow tracking URI {dead} does not answer") and err.count("\n") == 1

    monkeypatch.setitem(sys.modules, "mlflow", None)  # the extra not installed
    with pytest.raises(ParamsError, match=r"mlflow is not installed here; .*ragtrial\[mlflow\]"):
        MlflowExport(uri)
    assert main(["export", "mlflow", "--outputs", str(outputs), "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err
    assert "pip install 'ragtrial[mlflow]'" in err and err.count("\n") == 1


def test_run_with_mlflow_checks_the_tracking_uri_before_any_run(tmp_path, capsys):
    from ragtrial.cli import parser

    assert parser().parse_args(["run", "params/default.yaml", "--mlflow"]).mlflow == ""  # the default URI
    assert parser().parse_args(["run", "params/default.yaml"]).mlflow is None
    dead = f"http://127.0.0.1:{free_port()}"
    outputs = tmp_path / "outputs"
    assert main(["run", "params/default.yaml", "--outputs", str(outputs), "--mlflow", dead]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: MLflow tracking URI {dead} does not answer") and err.count("\n") == 1
    assert not list(outputs.glob("*/run.json"))  # no run started


def test_export_to_a_real_mlflow_server_reads_back_and_is_not_duplicated(tmp_path, mlflow_server):
    outputs = tmp_path / "outputs"
    write_run(outputs, f"{QA}-srv1")
    write_run(outputs, f"{QA}-srv2", f1=(0.75, 0.5), settings={"retrieval.k": 8})
    experiment = f"server-{tmp_path.name}"
    command = ["export", "mlflow", "--outputs", str(outputs), "--tracking-uri", mlflow_server]
    assert main([*command, "--experiment", experiment]) == 0
    assert main([*command, "--experiment", experiment]) == 0  # again: updated, not added
    client, runs = read_back(mlflow_server, experiment)
    assert sorted(runs) == [f"{QA}-srv1", f"{QA}-srv2"]
    assert len(client.search_runs([client.get_experiment_by_name(experiment).experiment_id])) == 2
    run = runs[f"{QA}-srv2"]
    assert run.data.params["retrieval.k"] == "8" and run.data.metrics["summary/naive_rag/f1"] == 0.5
    assert run.data.metrics["by_question_type/hybrid/single_hop/f1_low"] == 0.2
    assert run.data.tags["ragtrial.notebook"] == QA
    assert "report.html" in artifact_paths(client, run.info.run_id)
    report = client.download_artifacts(run.info.run_id, "report.html", str(tmp_path))
    assert f"run {QA}-srv2" in open(report).read()


def test_run_with_mlflow_exports_each_run_as_it_finishes(scripted, tmp_path, notebook_kernels):
    from conftest import PROJECT_ROOT

    from ragtrial.runner.batch import run_batch

    scripted.default_reply = lambda body: (
        '{"city": "Tokyo", "continent": "Asia"}' if body.get("response_format") else "Paris."
    )
    overrides = {
        "llm": {"backend": "openai_compatible", "base_url": scripted.base_url, "model": "scripted"},
        "cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"},
    }
    uri, lines = f"sqlite:///{tmp_path / 'mlflow.db'}", []
    [result] = run_batch(
        PROJECT_ROOT / "params" / "default.yaml",
        overrides,
        root=PROJECT_ROOT,
        outputs=tmp_path / "out",
        only=["00_backend_check"],
        log=lines.append,
        mlflow=uri,
    )
    assert result.status == "completed", result.error
    client, runs = read_back(uri)
    run = runs[result.run_id]
    assert any(f"mlflow: {result.run_id} created as MLflow run {run.info.run_id}" in line for line in lines)
    assert (
        run.data.params["llm.model"] == "scripted"
        and run.data.tags["ragtrial.batch"] == "params/default.yaml"
    )
    assert {"report.html", "run.json", "ledger.csv"} <= set(artifact_paths(client, run.info.run_id))
    with pytest.raises(TrackingUnreachable):  # checked before the first run
        run_batch(
            PROJECT_ROOT / "params" / "default.yaml",
            overrides,
            root=PROJECT_ROOT,
            outputs=tmp_path / "out",
            only=["00_backend_check"],
            log=lines.append,
            mlflow=f"http://127.0.0.1:{free_port()}",
        )
