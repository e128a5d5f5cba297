"""The regression mode of the diagnostics: each rule on hand-built summaries, baseline files, and
`ragtrial diagnose` on a completed notebook-09 run folder prepared by hand (run_batch skips it).
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import yaml

from ragtrial import cli
from ragtrial.cli import main
from ragtrial.config.base import ParamsError
from ragtrial.config.batch import load_batch
from ragtrial.runner import batch as runner_batch
from ragtrial.runner.regression import (
    DIAGNOSTICS_NOTEBOOK,
    load_baseline,
    regressions,
    render_regressions,
    save_baseline,
)

NAN = math.nan


def summary_frame(*rows: tuple) -> pd.DataFrame:
    """Rows (method, category, metric, mean, threshold, unavailable) as the summary's contract has them."""
    records = []
    for method, category, metric, mean, threshold, unavailable in rows:
        computed = not unavailable
        records.append(
            {
                "method": method,
                "category": category,
                "metric": metric,
                "n": 4 if computed else 0,
                "mean": mean if computed else NAN,
                "ci_low": mean - 0.1 if computed else NAN,
                "ci_high": mean + 0.1 if computed else NAN,
                "threshold": threshold,
                "below_threshold": bool(computed and not math.isnan(threshold) and mean < threshold),
                "unavailable": unavailable,
            }
        )
    return pd.DataFrame(records)


def rules_of(found: pd.DataFrame) -> dict[tuple[str, str, str], str]:
    return {(r.method, r.category, r.metric): r.rules for r in found.itertuples()}


def test_a_metric_below_its_threshold_regresses_by_its_shortfall():
    summary = summary_frame(
        ("naive_rag", "multi_hop", "entity_recall", 0.62, 0.70, ""),
        ("naive_rag", "single_hop", "entity_recall", 0.90, 0.85, ""),
        ("naive_rag", "single_hop", "answer_correct", 0.10, NAN, ""),  # no threshold: no rule applies
    )
    found = regressions(summary)
    assert rules_of(found) == {("naive_rag", "multi_hop", "entity_recall"): "below_threshold"}
    assert found.loc[0, "below_threshold_by"] == pytest.approx(0.08) and found.loc[0, "value"] == 0.62


def test_a_fall_below_the_baseline_by_more_than_the_tolerance_regresses():
    baseline = summary_frame(("hybrid", "temporal", "answer_correct", 0.85, NAN, ""))
    now = summary_frame(("hybrid", "temporal", "answer_correct", 0.70, NAN, ""))
    found = regressions(now, baseline, tolerance=0.05)
    assert rules_of(found) == {("hybrid", "temporal", "answer_correct"): "below_baseline"}
    assert found.loc[0, "below_baseline_by"] == pytest.approx(0.15) and found.loc[0, "baseline"] == 0.85


@pytest.mark.parametrize("now", [0.75, 0.78, 0.85, 0.95])
def test_a_fall_within_the_tolerance_passes(now):
    baseline = summary_frame(("hybrid", "temporal", "answer_correct", 0.80, NAN, ""))
    found = regressions(summary_frame(("hybrid", "temporal", "answer_correct", now, NAN, "")), baseline, 0.05)
    assert found.empty, found  # 0.80 - 0.75 is exactly the tolerance, in floating point a hair over


def test_both_rules_on_one_metric_give_one_row():
    baseline = summary_frame(("graph_walk", "multi_hop", "relationship_recall", 0.90, 0.80, ""))
    now = summary_frame(("graph_walk", "multi_hop", "relationship_recall", 0.50, 0.80, ""))
    found = regressions(now, baseline)
    assert rules_of(found) == {
        ("graph_walk", "multi_hop", "relationship_recall"): "below_threshold+below_baseline"
    }


def test_a_metric_computed_in_the_baseline_and_unavailable_now_regresses():
    baseline = summary_frame(
        ("hybrid", "temporal", "grounding", 0.91, 0.90, ""),
        ("hybrid", "temporal", "citation_coverage", 0.97, 0.95, ""),
    )
    now = summary_frame(("hybrid", "temporal", "grounding", NAN, 0.90, "no claim could be extracted"))
    found = regressions(now, baseline)
    assert rules_of(found) == {
        ("hybrid", "temporal", "grounding"): "became_unavailable",
        ("hybrid", "temporal", "citation_coverage"): "became_unavailable",  # its row is gone
    }
    assert list(found["unavailable"]) == ["no claim could be extracted", "no row in this summary"]
    assert math.isnan(found.loc[0, "value"]) and found.loc[0, "baseline"] == 0.91


def test_a_metric_unavailable_in_both_or_with_no_baseline_does_not_regress():
    baseline = summary_frame(("closed_book", "single_hop", "entity_recall", NAN, 0.85, "no context"))
    now = summary_frame(
        ("closed_book", "single_hop", "entity_recall", NAN, 0.85, "no context"),
        ("closed_book", "multi_hop", "entity_recall", NAN, 0.70, "no context"),
    )
    assert regressions(now, baseline).empty
    assert regressions(now).empty


def test_the_printed_lines_say_what_regressed_and_by_how_much():
    baseline = summary_frame(
        ("hybrid", "temporal", "answer_correct", 0.85, NAN, ""),
        ("hybrid", "temporal", "grounding", 0.91, 0.90, ""),
    )
    now = summary_frame(
        ("naive_rag", "multi_hop", "entity_recall", 0.62, 0.70, ""),
        ("hybrid", "temporal", "answer_correct", 0.70, NAN, ""),
        ("hybrid", "temporal", "grounding", NAN, 0.90, "no claim"),
    )
    lines = render_regressions(
        regressions(now, baseline), run_id="09-x", checked=3, baseline="base.json", tolerance=0.05
    )
    assert lines == [
        "09-x: 3 regression(s) among 3 metrics checked against their thresholds and baseline base.json, "
        "tolerance 0.05",
        "  REGRESSED naive_rag / multi_hop / entity_recall: 0.620 (n 4) is below its threshold 0.700 "
        "by 0.080",
        "  REGRESSED hybrid / temporal / answer_correct: 0.700 (n 4) is 0.150 below the baseline's 0.850, "
        "more than the tolerance 0.05",
        "  REGRESSED hybrid / temporal / grounding: unavailable now (no claim), 0.910 in the baseline",
    ]
    assert render_regressions(
        regressions(baseline), run_id="09-x", checked=2, baseline=None, tolerance=0.05
    ) == ["09-x: no regression (2 metrics checked against their thresholds)"]


def test_a_baseline_round_trips(tmp_path):
    summary = summary_frame(
        ("naive_rag", "multi_hop", "entity_recall", 0.62, 0.70, ""),
        ("closed_book", "single_hop", "entity_recall", NAN, 0.85, "no context"),
    )
    path = save_baseline(
        summary, tmp_path / "base.json", run_id="09-abc", settings_hash="abc", git_commit="deadbeef"
    )
    baseline = load_baseline(path)
    assert (baseline.run_id, baseline.settings_hash, baseline.git_commit) == ("09-abc", "abc", "deadbeef")
    pd.testing.assert_frame_equal(baseline.frame(), summary, check_dtype=False)
    assert regressions(summary, baseline.frame()).shape[0] == 1  # only its own threshold rule


@pytest.mark.fault
def test_a_summary_without_a_contract_column_is_an_error():
    summary = summary_frame(("naive_rag", "multi_hop", "entity_recall", 0.62, 0.70, "")).drop(columns="n")
    with pytest.raises(ValueError, match="missing column.*n"):
        regressions(summary)


@pytest.mark.fault
def test_a_summary_that_breaks_its_contract_is_not_saved_as_a_baseline(tmp_path):
    summary = summary_frame(("naive_rag", "multi_hop", "entity_recall", 0.62, 0.70, "")).assign(n=NAN)
    with pytest.raises(ValueError, match=r"the diagnostics summary: key 'rows\.0\.n'"):
        save_baseline(summary, tmp_path / "base.json", run_id="09-a", settings_hash="a", git_commit="c")
    assert not (tmp_path / "base.json").exists()


def baseline_text(tmp_path, edit) -> str:
    summary = summary_frame(
        ("naive_rag", "multi_hop", "entity_recall", 0.62, 0.70, ""),
        ("hybrid", "temporal", "grounding", 0.91, 0.90, ""),
    )
    path = save_baseline(
        summary, tmp_path / "base.json", run_id="09-abc", settings_hash="abc", git_commit="c"
    )
    record = json.loads(path.read_text())
    edit(record)
    return json.dumps(record)


@pytest.mark.fault
@pytest.mark.parametrize(
    ("edit", "names"),
    [
        (lambda r: r["rows"][1].update(mean="high"), "key 'rows.1.mean'"),
        (lambda r: r["rows"][0].pop("metric"), "key 'rows.0.metric'"),
        (lambda r: r["rows"][1].update(mean=None), "key 'rows.1.mean'"),  # computed, yet no mean
        (lambda r: r["rows"].append(dict(r["rows"][0])), "rows 0 and 2"),
        (lambda r: r.update(kind="something else"), "key 'kind'"),
        (lambda r: r.update(rows=[]), "key 'rows'"),
    ],
)
def test_a_malformed_baseline_names_the_file_and_the_field(tmp_path, edit, names):
    path = tmp_path / "bad.json"
    path.write_text(baseline_text(tmp_path, edit))
    with pytest.raises(ParamsError) as err:
        load_baseline(path)
    assert str(path) in str(err.value) and names in str(err.value), err.value


@pytest.mark.fault
@pytest.mark.parametrize(("content", "names"), [("{rows: [", "not valid JSON"), (None, "not found")])
def test_an_unreadable_baseline_names_the_file(tmp_path, content, names):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ParamsError) as err:
        load_baseline(path)
    assert str(path) in str(err.value) and names in str(err.value), err.value


# --- ragtrial diagnose on a prepared project ---------------------------------------------------------

PASSING = summary_frame(
    ("naive_rag", "multi_hop", "entity_recall", 0.75, 0.70, ""),
    ("naive_rag", "multi_hop", "answer_correct", 0.60, NAN, ""),
)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project root whose notebooks/ holds a (never executed) notebook 09 and notebook 00, as cwd."""
    monkeypatch.setattr(cli.signal, "signal", lambda *args: None)  # the test process keeps its handlers
    root = tmp_path / "project"
    (root / "notebooks").mkdir(parents=True)
    for name in (DIAGNOSTICS_NOTEBOOK, "00_backend_check"):
        (root / "notebooks" / f"{name}.ipynb").write_text(
            json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
        )
    monkeypatch.chdir(root)
    return root


def completed_run(root, notebooks=(DIAGNOSTICS_NOTEBOOK,), summary=PASSING, settings=None):
    """The batch file and the completed run folders that `run_batch` skips, the 09 run's summary saved."""
    batch = root / "batch.yaml"
    shared = {"cache": {"url": f"sqlite:///{root / 'cache.sqlite'}"}, **(settings or {})}
    batch.write_text(yaml.safe_dump({"settings": shared, "runs": [{"notebook": n} for n in notebooks]}))
    specs, _ = load_batch(batch, notebooks_dir=root / "notebooks")
    for spec in specs:
        run_dir = root / "outputs" / spec.run_id
        (run_dir / "tables").mkdir(parents=True)
        (run_dir / "run.json").write_text(
            json.dumps({"run_id": spec.run_id, "status": "completed", "git_commit": "c0ffee", "ledger": {}})
        )
        if summary is not None and spec.notebook == DIAGNOSTICS_NOTEBOOK:
            summary.to_parquet(run_dir / "tables" / "diagnostics_summary.parquet", index=False)
    run_id = (
        next(s.run_id for s in specs if s.notebook == DIAGNOSTICS_NOTEBOOK) if summary is not None else ""
    )
    return str(batch), run_id


def diagnose(capsys, *args: str) -> tuple[int, list[str], list[str]]:
    code = main(["diagnose", *args])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err.splitlines()


def test_diagnose_exits_0_when_nothing_regressed(capsys, project):
    batch, run_id = completed_run(project)
    code, out, _ = diagnose(capsys, batch)
    assert code == 0, out
    assert out[-1] == f"{run_id}: no regression (2 metrics checked against their thresholds)"
    assert f"note: {run_id} was not re-run (completed at commit c0ffee); --force runs it again" in out


def test_diagnose_exits_1_and_prints_a_metric_below_its_threshold(capsys, project):
    failing = summary_frame(("naive_rag", "multi_hop", "entity_recall", 0.62, 0.70, ""))
    batch, run_id = completed_run(project, summary=failing)
    code, out, _ = diagnose(capsys, batch)
    assert code == 1
    assert out[-2:] == [
        f"{run_id}: 1 regression(s) among 1 metrics checked against their thresholds",
        "  REGRESSED naive_rag / multi_hop / entity_recall: 0.620 (n 4) is below its threshold 0.700 "
        "by 0.080",
    ]


def test_diagnose_saves_a_baseline_and_compares_with_it(capsys, project):
    batch, run_id = completed_run(project)
    base = project / "base.json"
    assert diagnose(capsys, batch, "--save-baseline", str(base))[0] == 0
    assert load_baseline(base).run_id == run_id and load_baseline(base).git_commit == "c0ffee"
    worse = PASSING.assign(mean=[0.75, 0.40])  # answer_correct fell by 0.20; no threshold of its own
    worse.to_parquet(project / "outputs" / run_id / "tables" / "diagnostics_summary.parquet", index=False)
    code, out, _ = diagnose(capsys, batch, "--baseline", str(base))
    assert code == 1
    assert out[-1] == (
        "  REGRESSED naive_rag / multi_hop / answer_correct: 0.400 (n 4) is 0.200 below the baseline's "
        "0.600, more than the tolerance 0.05"
    )
    assert out[-2].endswith(f"baseline {base} (run {run_id}, commit c0ffee), tolerance 0.05"), out
    assert diagnose(capsys, batch, "--baseline", str(base), "--tolerance", "0.25")[0] == 0


@pytest.mark.parametrize(("tolerance", "exit_code"), [(0.05, 1), (0.25, 0)])
def test_diagnose_takes_the_baseline_and_tolerance_from_the_settings(capsys, project, tolerance, exit_code):
    base = save_baseline(PASSING, project / "base.json", run_id="09-old", settings_hash="old", git_commit="c")
    worse = PASSING.assign(mean=[0.75, 0.40])
    diagnostics = {"baseline_path": "base.json", "tolerance": tolerance}  # relative to the project root
    batch, run_id = completed_run(project, summary=worse, settings={"diagnostics": diagnostics})
    code, out, _ = diagnose(capsys, batch)
    assert code == exit_code, out
    heading = next(line for line in out if line.startswith(f"{run_id}: "))
    assert f"baseline {base} (run 09-old, commit c), tolerance {tolerance:g}" in heading, heading


@pytest.mark.fault
def test_a_batch_without_a_diagnostics_run_is_an_error_naming_it(capsys, project):
    batch, _ = completed_run(project, notebooks=("00_backend_check",), summary=None)
    code, out, err = diagnose(capsys, batch)
    assert code == 2 and len(err) == 1 and batch in err[0] and DIAGNOSTICS_NOTEBOOK in err[0], err


@pytest.mark.fault
@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--tolerance", "2"], "--tolerance 2"),
        (["--only", "00_backend_check"], "--only 00_backend_check"),
        (["--baseline", "missing.json"], "missing.json: baseline file not found"),
    ],
)
def test_bad_diagnose_options_fail_in_one_line(capsys, project, args, names):
    batch, _ = completed_run(project, notebooks=(DIAGNOSTICS_NOTEBOOK, "00_backend_check"))
    code, out, err = diagnose(capsys, batch, *args)
    assert code == 2 and len(err) == 1 and names in err[0], err
    assert not out  # nothing ran: run_batch logs every run it starts


@pytest.mark.fault
def test_a_completed_run_without_a_summary_fails_the_check(capsys, project):
    batch, run_id = completed_run(project)
    (project / "outputs" / run_id / "tables" / "diagnostics_summary.parquet").unlink()
    code, _, err = diagnose(capsys, batch)
    assert code == 1
    assert err == [
        f"error: {project / 'outputs' / run_id / 'tables' / 'diagnostics_summary.parquet'}: the run saved no "
        "diagnostics_summary table"
    ]


@pytest.mark.fault
def test_a_failed_diagnostics_run_fails_the_check_with_its_reason(capsys, project, monkeypatch):
    batch, run_id = completed_run(project)

    def failing_run(spec, root, outputs, **options):
        return runner_batch.RunResult(spec.run_id, spec.notebook, "failed", outputs / spec.run_id, {}, "boom")

    monkeypatch.setattr(runner_batch, "execute_run", failing_run)
    code, out, err = diagnose(capsys, batch)
    assert code == 1 and err == [f"FAILED {run_id}: boom (see {project / 'outputs' / run_id})"], err
    assert not any("regression" in line for line in out), out  # a failed run's old summary is not read
