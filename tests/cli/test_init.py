"""`ragtrial init`: the batch it writes for a folder of text files or a named data set loads, passes
the preflight, runs exactly the notebooks the data set can feed (with their `without_gold` settings
when it has no questions) and names each other one with why.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from conftest import PROJECT_ROOT, SHARED_DATASETS

from ragtrial.cli import main
from ragtrial.cli.init import planned_runs
from ragtrial.config.base import ParamsError
from ragtrial.config.batch import load_batch
from ragtrial.config.notebooks import NOTEBOOKS, notebook_specs
from ragtrial.config.paths import project_root
from ragtrial.runner.preflight import preflight

NOTEBOOKS_DIR = PROJECT_ROOT / "notebooks"
CAROL = SHARED_DATASETS / "gutenberg_christmas_carol"


def _shared(folder: Path) -> Path:
    if not folder.is_dir():
        pytest.skip(f"no shared copy at {folder}")
    return folder


def _comments(text: str) -> str:
    """The file's comments as one line of text (a comment wraps over several lines)."""
    return " ".join(
        line.strip().removeprefix("# ") for line in text.splitlines() if line.strip().startswith("#")
    )


def _specs(batch: Path, root: Path = PROJECT_ROOT):
    specs, _ = load_batch(batch, notebooks_dir=NOTEBOOKS_DIR)
    preflight(specs, root)
    return {s.notebook: s for s in specs}


def test_a_text_folder_runs_every_notebook_that_needs_no_gold(tmp_path, capsys):
    batch = tmp_path / "carol.yaml"
    assert main(["init", str(_shared(CAROL)), "--to", str(batch)]) == 0
    specs = _specs(batch)
    assert list(specs) == [
        spec.name for spec in notebook_specs() if not spec.needs and not spec.added_by_batch
    ]
    assert list(specs) == [
        "00_backend_check", "01_build_index", "02_question_entity_distribution", "03_question_relevance",
        "06_judge_bias_audit", "07_pairwise_method_comparison", "08_claims_comprehensiveness_diversity",
        "10_verdict", "11_upstream_systems", "12_judge_calibration", "14_compare_runs",
    ]  # fmt: skip
    assert specs["06_judge_bias_audit"].settings.judge.question_source == "graph"
    assert specs["07_pairwise_method_comparison"].settings.judge.question_source == "graph"
    assert specs["08_claims_comprehensiveness_diversity"].settings.claims.question_source == "persona"
    data = specs["00_backend_check"].settings.data
    assert (data.dataset, data.path, data.limit_questions) == (
        "text_folder",
        "gutenberg_christmas_carol",
        None,
    )
    assert specs["00_backend_check"].settings.llm.backend == "embedded"
    comments = _comments(batch.read_text())
    for name in ("04_rag_vs_graphrag_qa", "05_rag_vs_graphrag_summarization", "09_retrieval_diagnostics"):
        spec = NOTEBOOKS.get(name)
        assert (
            f"left out: {name} cannot run on this data set: it has no {spec.needs[0]}, and {spec.why_not}."
            in comments
        )
    assert "raise these for a research run" in comments
    out = capsys.readouterr().out
    assert f"ragtrial check {batch}" in out and f"ragtrial run {batch}" in out
    assert str(PROJECT_ROOT / "outputs" / "indexes") in out


def test_a_named_data_set_on_an_endpoint(tmp_path, monkeypatch, capsys):
    _shared(SHARED_DATASETS / "musique_sample_hipporag")
    monkeypatch.setenv("MY_ENDPOINT_KEY", "sk-init-test-secret-value")
    batch = tmp_path / "musique.yaml"
    argv = ["init", "--dataset", "musique", "--to", str(batch), "--base-url", "http://127.0.0.1:9/v1"]
    assert main([*argv, "--model", "qwen2.5:7b-instruct", "--api-key-env", "MY_ENDPOINT_KEY"]) == 0
    specs = _specs(batch)
    assert "04_rag_vs_graphrag_qa" in specs and "09_retrieval_diagnostics" in specs
    assert "05_rag_vs_graphrag_summarization" not in specs  # no reference summaries
    assert specs["06_judge_bias_audit"].settings.judge.question_source == "dataset"  # its own questions
    settings = specs["04_rag_vs_graphrag_qa"].settings
    assert (settings.data.dataset, settings.data.path, settings.data.limit_questions) == (
        "musique",
        "musique_sample_hipporag",
        8,
    )
    llm = settings.llm
    assert (llm.backend, llm.base_url, llm.model, llm.api_key_env) == (
        "openai_compatible",
        "http://127.0.0.1:9/v1",
        "qwen2.5:7b-instruct",
        "MY_ENDPOINT_KEY",
    )
    # the embedded model's budget for notebook 11 is not an endpoint's
    assert specs["11_upstream_systems"].settings.systems.graphrag.max_context_tokens == 12000
    assert "sk-init-test-secret-value" not in batch.read_text() + capsys.readouterr().out


def test_a_data_set_not_downloaded_yet_is_planned_from_its_publication(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAGTRIAL_DATA_ROOT", str(tmp_path / "empty_root"))
    batch = tmp_path / "qmsum.yaml"
    assert main(["init", "--dataset", "qmsum", "--to", str(batch)]) == 0
    assert "not there yet: `ragtrial datasets download qmsum" in capsys.readouterr().out
    specs, _ = load_batch(batch, notebooks_dir=NOTEBOOKS_DIR)
    assert "05_rag_vs_graphrag_summarization" in {s.notebook for s in specs}
    assert "04_rag_vs_graphrag_qa" not in {s.notebook for s in specs}  # QMSum has no answer strings
    with pytest.raises(
        ParamsError, match="key 'data.path': no folder .*qmsum.*is published at: Zhong et al."
    ):
        preflight(specs, PROJECT_ROOT)


def test_a_folder_outside_the_data_root_is_named_by_its_absolute_path(tmp_path):
    corpus = tmp_path / "my corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Ada Lovelace wrote the first program for the Analytical Engine.")
    batch = tmp_path / "mine.yaml"
    assert main(["init", str(corpus), "--to", str(batch)]) == 0
    specs = _specs(batch)
    assert specs["01_build_index"].settings.data.path == str(corpus)
    assert "an absolute path" in batch.read_text()


def test_where_the_file_goes(tmp_path, monkeypatch, capsys):
    carol = str(_shared(CAROL))
    folder = tmp_path / "project"
    assert main(["init", carol, "--to", str(folder)]) == 0  # a folder: its ragtrial.yaml marks a project
    assert (folder / "ragtrial.yaml").is_file() and project_root(folder / "deeper") == folder
    (folder / "notes").mkdir()
    monkeypatch.chdir(folder / "notes")  # inside that project: its own ragtrial.yaml, which exists
    assert main(["init", carol]) == 2
    assert f"{folder / 'ragtrial.yaml'} exists" in capsys.readouterr().err
    kit = tmp_path / "kit"
    (kit / "sub").mkdir(parents=True)
    (kit / "notebooks").symlink_to(NOTEBOOKS_DIR)
    monkeypatch.chdir(kit / "sub")  # inside a kit checkout: params/<folder name>.yaml
    assert main(["init", carol]) == 0
    assert (kit / "params" / "gutenberg_christmas_carol.yaml").is_file()
    assert "ragtrial run params/gutenberg_christmas_carol.yaml" in capsys.readouterr().out
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # anywhere else: ./ragtrial.yaml
    assert main(["init", carol]) == 0
    assert (elsewhere / "ragtrial.yaml").is_file()
    before = (elsewhere / "ragtrial.yaml").read_text()
    assert main(["init", carol, "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]) == 2
    assert "exists; run again with --force" in capsys.readouterr().err
    assert (elsewhere / "ragtrial.yaml").read_text() == before
    assert main(["init", carol, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--force"]) == 0
    assert "openai_compatible" in (elsewhere / "ragtrial.yaml").read_text()
    assert not [p for p in os.listdir(elsewhere) if p.startswith(".")]  # no draft left behind


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "name a folder of text files"),
        (["{carol}", "--model", "m"], "give --base-url too"),
        (["{carol}", "--base-url", "http://127.0.0.1:9/v1"], "--base-url needs --model"),
        (
            ["{carol}", "--base-url", "http://u:hunter22@127.0.0.1:9/v1", "--model", "m"],
            "carries credentials",
        ),
        (["{carol}", "--base-url", "localhost:9", "--model", "m"], "llm.base_url"),
        (["{carol}", "--dataset", "nope"], "unknown data set; known: 2wikimultihopqa"),
        (["{tmp}/absent"], "absent: no such folder"),
        (["{tmp}/absent", "--dataset", "query_log"], "absent: no such folder"),
        (
            ["{carol}/a_christmas_carol_pg24022.txt", "--to", "{carol}/a_christmas_carol_pg24022.txt"],
            "neither",
        ),
        (["{tmp}", "--dataset", "musique"], "not readable as data set 'musique'"),
        (["--dataset", "query_log"], "reads your own files"),
    ],
)
def test_what_init_refuses(tmp_path, capsys, argv, message):
    filled = [a.format(carol=CAROL, tmp=tmp_path) for a in argv]
    to = [] if "--to" in filled else ["--to", str(tmp_path / "out.yaml")]
    assert main(["init", *filled, *to]) == 2
    err = capsys.readouterr().err
    assert message in err and "hunter22" not in err
    assert not (tmp_path / "out.yaml").exists()


def test_the_plan_follows_what_the_data_set_provides():
    plan = {r.notebook: r for r in planned_runs({"questions"}, embedded=False)}  # a query log, a podcast
    assert {n for n, r in plan.items() if r.left_out} == {
        "04_rag_vs_graphrag_qa",
        "05_rag_vs_graphrag_summarization",
        "13_retrieval_benchmark",  # it scores gold passages
    }
    assert plan["09_retrieval_diagnostics"].settings == {} and plan["06_judge_bias_audit"].settings == {}
    bare = {r.notebook: r for r in planned_runs(set(), embedded=True)}
    assert bare["07_pairwise_method_comparison"].nested_settings() == {"judge": {"question_source": "graph"}}
    assert bare["11_upstream_systems"].settings["systems.graphrag.max_context_tokens"] == 1500
    assert yaml.safe_dump(bare["11_upstream_systems"].nested_settings())  # plain data, as a batch holds it
