"""Notebook 13 through params/real_evidence.yaml, each data set cut to a slice: every run completes
with no model call (only embeddings in the ledger) while the model's endpoint refuses every
connection, its prose words only saved tables, the published systems are scored in their own group,
and the kit's dense figures equal an independent computation with sentence-transformers directly.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import PROJECT_ROOT
from traceable import assert_narrated_from_saved_tables

from ragtrial.config.index import IndexSettings
from ragtrial.config.settings import Settings
from ragtrial.data.experiment_dataset import load_experiment_dataset
from ragtrial.evaluation.answer_metrics import recall_at_k
from ragtrial.index.chunk_documents import chunks_for
from ragtrial.llm.embedder import resolve_local_embedding_model
from ragtrial.llm.ledger import read_ledger
from ragtrial.runner.batch import run_batch

# one worker runs the module: the batch below is its tests' one fixture (~1 min alone), built once. 24
# passages per data set hold every kept question's gold passages and some distractors (40 passages and
# 10 questions: 74 s alone; in make test contention, not the slice, sets its time)
pytestmark = [pytest.mark.usefixtures("notebook_kernels"), pytest.mark.xdist_group("benchmark_notebook")]
# nothing listens there: a model call would fail, so a completed run made none
DEAD_ENDPOINT = {"backend": "openai_compatible", "base_url": "http://127.0.0.1:1/v1", "model": "nowhere"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("benchmark")
    overrides = {
        "llm": DEAD_ENDPOINT,
        "cache": {"url": f"sqlite:///{folder / 'cache.sqlite'}"},
        "index": {"store_path": str(folder / "indexes")},
        "data": {"limit_questions": 6, "limit_documents": 24},
        "benchmark": {"bootstrap_resamples": 200},
    }
    results = run_batch(
        PROJECT_ROOT / "params" / "real_evidence.yaml",
        overrides,
        root=PROJECT_ROOT,
        outputs=folder / "out",
        log=lambda _: None,
    )
    for result in results:
        assert result.status == "completed", (result.run_id, result.error)
    return {
        json.loads((r.run_dir / "run.json").read_text())["settings"]["data"]["dataset"]: r for r in results
    }


def test_every_run_ranks_without_a_model_call_and_words_only_saved_tables(runs):
    assert set(runs) == {"musique", "2wikimultihopqa", "hotpotqa", "multihop_rag"}
    for result in runs.values():
        assert result.summary["llm_calls_live"] == 0
        ledger = read_ledger(result.run_dir / "ledger.csv")
        assert set(ledger["kind"]) <= {"embedding"}, set(ledger["kind"])
        assert_narrated_from_saved_tables(result.run_dir)
        record = json.loads((result.run_dir / "run.json").read_text())
        assert "not research findings" not in record["headline"]


def test_musique_reads_both_graphs_and_reports_by_hop_count(runs):
    tables = runs["musique"].run_dir / "tables"
    summary = pd.read_parquet(tables / "summary.parquet")
    assert {"hipporag:nlp", "hipporag:import", "graph_walk:import", "bm25", "vector"} <= set(
        summary["method"]
    )
    assert set(summary["question_type"]) - {"all"} <= {"2hop", "3hop", "4hop"}
    bills = pd.read_parquet(tables / "graph_bills.parquet").set_index("graph")
    assert list(bills.index) == ["nlp", "import"]
    assert (bills["model_calls"] == 0).all()
    assert "did not track its cost" in bills.loc["import", "published_cost_source"]
    reproduction = pd.read_parquet(tables / "reproduction.parquet")
    assert {"bm25", "vector", "hipporag:import"} == set(reproduction["kit_method"])
    # seed 003: the gold answers looked up in both graphs, each question once per graph
    links = pd.read_parquet(tables / "answer_entity_links.parquet")
    coverage = pd.read_parquet(tables / "answer_entities_in_kg.parquet").set_index(["graph", "question_type"])
    for graph in ("nlp", "import"):
        mine = links[links["graph"] == graph]
        row = coverage.loc[(graph, "all")]
        assert row["questions"] == len(mine) == mine["question_id"].nunique()
        assert row["in_kg_exact"] == (mine["in_kg"] == "exact").sum()
        assert row["answer_entities"] == row["in_kg_exact"] + row["in_kg_embedding"] + row["not_in_kg"]


def test_a_data_set_without_gold_answers_counts_no_answer_entity(runs):
    coverage = pd.read_parquet(runs["2wikimultihopqa"].run_dir / "tables" / "answer_entities_in_kg.parquet")
    row = coverage[coverage["question_type"] == "all"].iloc[0]
    assert row["answer_entities"] == 0 and row["no_entity"] == row["questions"] > 0
    assert row["no_entity_reasons"] == f"no gold answer {row['questions']}" and pd.isna(row["share_in_kg"])


def test_the_published_systems_are_a_group_of_their_own(runs):
    tables = runs["2wikimultihopqa"].run_dir / "tables"
    chosen = pd.read_parquet(tables / "baselines.parquet").set_index("group")
    assert chosen.loc["fast-graphrag benchmark", "baseline"] == "vectordb_101"
    assert chosen.loc["fast-graphrag benchmark", "measure"] == "all_supporting"
    compared = pd.read_parquet(tables / "comparisons.parquet")
    published = compared[compared["group"] == "fast-graphrag benchmark"]
    assert set(published["baseline"]) == {"vectordb_101"}
    assert not set(published["method"]) & {"bm25", "vector", "hybrid"}


def test_the_dense_figures_equal_sentence_transformers_directly(runs):
    """In the run's precision (bfloat16, as params/real_evidence.yaml sets it) and in float32: the
    faster arithmetic changes no recall on the slice.
    """
    import torch
    from sentence_transformers import SentenceTransformer

    result = runs["musique"]
    settings = Settings.model_validate(json.loads((result.run_dir / "run.json").read_text())["settings"])
    assert settings.embeddings.precision == "bfloat16"
    dataset = load_experiment_dataset(settings.data)
    chunks = chunks_for(dataset.documents_frame(), IndexSettings(chunking="titled_documents"))
    model = SentenceTransformer(resolve_local_embedding_model(settings.embeddings.model), device="cpu")
    questioned = [q for q in dataset.questions if q.gold_doc_ids]
    retrievals = pd.read_parquet(result.run_dir / "tables" / "retrievals.parquet")
    kit = retrievals[retrievals["method"] == "vector"].set_index("question_id")
    doc_ids = np.asarray(chunks["doc_id"])
    for half in (True, False):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=half):
            passages = model.encode(list(chunks["text"]), normalize_embeddings=True)
            asked = model.encode([q.question for q in questioned], normalize_embeddings=True)
        agree = 0
        for q, vector in zip(questioned, asked, strict=True):
            theirs = list(doc_ids[np.argsort(-(passages @ vector), kind="stable")[:10]])
            ours = list(kit.loc[q.question_id, "doc_ids"])
            for k in (2, 5):
                assert recall_at_k(ours, q.gold_doc_ids, k) == recall_at_k(theirs, q.gold_doc_ids, k), (
                    q.question_id,
                    half,
                )
            agree += ours == theirs
        assert agree >= len(kit) - 1  # the same ranking, a near-tie swapped by batch padding at most
