"""The notebooks on a folder of text files (no questions, no gold) against the scripted server: each
notebook that needs no gold runs with the settings `ragtrial init` writes for it (`cli.init.planned_runs`:
its `config.notebooks.NOTEBOOKS` `without_gold` settings) and records its headline; each one that
needs gold (init leaves it out) stops at its data set with one line naming the data set, what it
lacks and why. Notebook 11 runs on a text folder in the default batch
(tests/methods/test_upstream_notebook.py, marked `systems`).
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from conftest import PROJECT_ROOT, endpoint_settings
from latency_server import schema_reply
from scripted_server import ScriptedServer
from traceable import assert_narrated_from_saved_tables

from ragtrial.cli.init import planned_runs
from ragtrial.config.notebooks import NOTEBOOKS
from ragtrial.llm.ledger import read_ledger
from ragtrial.runner.batch import run_batch
from ragtrial.runner.batch_estimate import compare_with_ledger, estimate_batch
from ragtrial.runner.context import HEADLINE_FILE

# one pytest worker runs the module: the batch below is its tests' one fixture (~2 min), built once
pytestmark = [pytest.mark.usefixtures("notebook_kernels"), pytest.mark.xdist_group("without_gold")]

PLANNED = {run.notebook: run for run in planned_runs(set(), embedded=False)}  # a text folder, an endpoint
RUNS_WITHOUT_GOLD = [n for n, run in PLANNED.items() if not run.left_out and n != "11_upstream_systems"]
NEED_GOLD = [n for n, run in PLANNED.items() if run.left_out]
CORPUS = {
    "carol.txt": "Scrooge kept the counting house in London. Marley was his partner. Bob Cratchit worked for "
    "Scrooge. Tiny Tim is the son of Bob Cratchit.\n\nThe ghost of Marley visited Scrooge on Christmas Eve.",
    "notes/fred.md": "Fred is the nephew of Scrooge. Fred invited Scrooge to Christmas dinner. The Ghost of "
    "Christmas Past showed Scrooge his school. Belle was engaged to Scrooge.",
}


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """The batch's estimate (made before it ran, as a user would) and its runs."""
    tmp = tmp_path_factory.mktemp("without_gold")
    for name, text in CORPUS.items():
        (tmp / "corpus" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "corpus" / name).write_text(text)
    batch = tmp / "batch.yaml"
    runs = [{"notebook": n, "settings": PLANNED[n].nested_settings()} for n in RUNS_WITHOUT_GOLD]
    runs += [{"notebook": n} for n in NEED_GOLD]
    batch.write_text(yaml.safe_dump({"settings": {}, "runs": runs}))
    with ScriptedServer() as server:
        server.default_reply = schema_reply
        settings = endpoint_settings(
            server.base_url,
            tmp,
            data={"dataset": "text_folder", "path": str(tmp / "corpus")},
            # 06's two runs of LightRAG each list the questions' keywords by model
            judge={"trials": 1, "bootstrap_resamples": 200, "self_method": "lightrag"},
            retrieval={"lightrag_keywords": "llm"},
            claims={"n_questions": 2, "bootstrap_resamples": 200},
            # 12 fits its judge to this batch's 06 audit, then simulates a few small studies
            calibration={
                "studies": 3,
                "simulated_trials": [1],
                "simulated_repeats": [1],
                "simulated_questions": [8],
                "workers": 1,
            },
        )
        planned, _ = estimate_batch(
            batch, settings, root=PROJECT_ROOT, outputs=tmp / "out", only=RUNS_WITHOUT_GOLD
        )
        done = run_batch(batch, settings, root=PROJECT_ROOT, outputs=tmp / "out", log=lambda _: None)
    return {r.notebook: r for r in done}, planned


@pytest.fixture(scope="module")
def results(ran):
    return ran[0]


@pytest.fixture(scope="module")
def estimate(ran):
    return ran[1]


def test_every_notebook_that_needs_no_gold_runs_on_a_text_folder_and_records_its_headline(results):
    for notebook in RUNS_WITHOUT_GOLD:
        result = results[notebook]
        assert result.status == "completed", f"{notebook}: {result.error}"
        headline = (result.run_dir / HEADLINE_FILE).read_text()
        assert headline.endswith("\n") and "\n" not in headline.rstrip("\n") and len(headline) > 20, notebook
    # the judges asked questions generated from the graph, the claims notebook persona questions
    for notebook, kinds in (
        ("06_judge_bias_audit", {"node", "edge", "subgraph"}),
        ("07_pairwise_method_comparison", {"node", "edge", "subgraph"}),
        ("08_claims_comprehensiveness_diversity", {"persona"}),
    ):
        asked = pd.read_parquet(results[notebook].run_dir / "tables" / "questions.parquet")
        assert len(asked) and set(asked["question_type"]) <= kinds, notebook


def test_the_claims_and_calibration_reports_are_narrated_from_their_saved_tables(results):
    # 12 here fits its judge to this batch's 06 audit
    for notebook in ("08_claims_comprehensiveness_diversity", "12_judge_calibration"):
        assert_narrated_from_saved_tables(results[notebook].run_dir)


def test_every_notebook_that_needs_gold_stops_with_one_line_naming_what_is_missing(results):
    for notebook in NEED_GOLD:
        spec, result = NOTEBOOKS.get(notebook), results[notebook]
        assert result.status == "failed", notebook
        assert result.error.startswith(
            f"ParamsError: notebook {notebook} cannot run on data set 'text_folder'"
        )
        assert all(f"no {kind}" in result.error for kind in spec.needs) and spec.why_not in result.error
        assert result.summary["llm_calls_live"] == 0  # stopped at the data set, before any model call


def test_the_judge_notebooks_save_each_judge_call_s_cost_and_narrate_from_their_tables(results):
    for notebook in (
        "06_judge_bias_audit",
        "07_pairwise_method_comparison",
        "08_claims_comprehensiveness_diversity",
    ):
        run_dir = results[notebook].run_dir
        costs = pd.read_parquet(run_dir / "tables" / "costs.parquet")
        judged = read_ledger(run_dir / "ledger.csv")["stage"].str.startswith("judge_")
        assert len(costs) > 0 and costs["calls"].sum() == judged.sum(), notebook
    for notebook in ("06_judge_bias_audit", "07_pairwise_method_comparison"):
        assert_narrated_from_saved_tables(results[notebook].run_dir)


def test_each_notebook_makes_the_calls_its_estimate_planned_stage_by_stage(results, estimate):
    # exact stages equal, upper bounds not exceeded (06's two runs of one method each list the
    # questions' keywords: the paper-size rehearsal made 2 x what the estimate planned before)
    made = 0
    for notebook in RUNS_WITHOUT_GOLD:
        result = results[notebook]
        planned = estimate[estimate["run_id"] == result.run_id]
        compared = compare_with_ledger(planned, read_ledger(result.run_dir / "ledger.csv"))
        # (empty for a notebook that plans and makes no model call)
        assert compared.empty or compared["agrees"].all(), (notebook, compared[~compared["agrees"]])
        made += len(compared)
    assert made > 10


def test_the_estimate_of_a_notebook_that_needs_gold_says_the_run_stops_instead_of_failing(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "carol.txt").write_text(CORPUS["carol.txt"])
    batch = tmp_path / "batch.yaml"
    batch.write_text(yaml.safe_dump({"settings": {}, "runs": [{"notebook": n} for n in NEED_GOLD]}))
    data = {"dataset": "text_folder", "path": str(corpus)}
    settings = endpoint_settings("http://127.0.0.1:9/v1", tmp_path, data=data)
    table, notes = estimate_batch(batch, settings, root=PROJECT_ROOT, outputs=tmp_path / "out")
    assert list(table["notebook"]) == NEED_GOLD and set(table["basis"]) == {"unknown"}
    assert (table["calls"] == 0).all() and table["note"].str.startswith(
        "the run stops before any model call"
    ).all()
    assert all(f"notebook {n} cannot run on data set 'text_folder'" in " ".join(notes) for n in NEED_GOLD)
