"""Notebooks 04 and 09 on the seeds' own stores, end to end against the scripted server: the
PostgreSQL twins answer beside the in-memory methods from the same passages, and notebook 09 pulls
each answer's subgraph from Kùzu and counts relationship recall on it. The database's password
reaches no output.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import cited_answer_reply, endpoint_settings, run_default_notebooks

pytestmark = pytest.mark.usefixtures("notebook_kernels")


def test_notebooks_04_and_09_on_postgresql_and_kuzu(scripted, tmp_path, postgres_url):
    scripted.default_reply = cited_answer_reply
    settings = endpoint_settings(
        scripted.base_url,
        tmp_path,
        index={"graph_source": "nlp", "reports": "none"},
        store={"url": postgres_url, "graph": "kuzu", "graph_path": str(tmp_path / "graphs")},
        qa={
            "methods": ["hybrid", "hybrid_postgresql", "graph_walk", "graph_walk_postgresql"],
            "baseline": "hybrid",
            "questions_per_type": 2,
            "bootstrap_resamples": 200,
        },
        diagnostics={
            "methods": ["graph_walk", "graph_walk_cypher"],
            "questions_per_type": 2,
            "bootstrap_resamples": 200,
            "relationship_edges": "induced",
        },
    )
    results = run_default_notebooks(settings, tmp_path, "04_rag_vs_graphrag_qa", "09_retrieval_diagnostics")
    qa, diagnostics = (r.run_dir / "tables" for r in results)
    answers = pd.read_parquet(qa / "answers.parquet")
    for twin in ("hybrid", "graph_walk"):
        memory = answers[answers["method"] == twin].set_index("question_id")["passage_ids"]
        store = answers[answers["method"] == f"{twin}_postgresql"].set_index("question_id")["passage_ids"]
        assert len(memory) and memory.map(list).to_dict() == store.map(list).to_dict(), twin
    recall = pd.read_parquet(diagnostics / "recall.parquet").set_index(["method", "question_id"])
    columns = ["entity_recall", "relationship_recall_retrieved", "relationship_recall_status"]
    assert recall.loc["graph_walk", columns].equals(recall.loc["graph_walk_cypher", columns])
    subgraphs = pd.read_parquet(diagnostics / "retrieved_subgraphs.parquet")
    assert {"graph_walk", "graph_walk_cypher"} <= set(subgraphs["method"])
    assert {"source", "relation", "target", "valid_from", "valid_to"} <= set(subgraphs)
    password = postgres_url.split(":")[2].split("@")[0]
    for run in results:
        for name in ("run.json", "report.html"):
            assert password not in (run.run_dir / name).read_text(), name
