"""An upstream system as a method, end to end through the kit: LightRAG (the real package) answering
through its worker and the kit's model proxy, against the scripted server. Its answers land in the
answers table with the context in the kit's ids, its calls in the ledger under the method's name,
a repeated run pays nothing, its index is built once, and a failure is recorded, never scored.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import SHARED_DATASETS, endpoint_settings, make_llm
from test_lightrag_worker import GRAPH, KEYWORDS, KIT_CHUNK

from ragtrial.config import Settings
from ragtrial.config.paths import WORKSPACE_FILE
from ragtrial.evaluation.run_methods import run_methods
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.embedder import Embedder
from ragtrial.methods.registry import make_methods
from ragtrial.methods.upstream.method import KitIds, systems_table
from ragtrial.records import Question

QUESTIONS = [
    Question(question_id="q1", question="Where was Ada Lovelace born?"),
    Question(question_id="q2", question="Who designed the Analytical Engine?"),
]
ANSWER = "She was born in London."


def kit_index() -> GraphIndex:
    chunks = pd.DataFrame(GRAPH["chunks"]).assign(position=[0, 1], n_tokens=10)
    entities = pd.DataFrame(GRAPH["entities"]).assign(degree=1, origin="llm")
    relations = pd.DataFrame(GRAPH["relations"])
    document = {"doc_id": "d1", "title": "Ada", "text": " ".join(chunks["text"]), "source": "test"}
    documents = pd.DataFrame([{**document, "date": None, "metadata": {}}])
    return GraphIndex(documents=documents, chunks=chunks, entities=entities, relations=relations)


def reply(body: dict) -> str:
    return KEYWORDS if "low_level_keywords" in body["messages"][-1]["content"] else ANSWER


def context(scripted, folder: Path, run: str) -> SimpleNamespace:
    """What a notebook's run gives the methods: settings, a ledger of its own, the shared cache."""
    run_dir = folder / run
    run_dir.mkdir()
    settings = Settings(**endpoint_settings(scripted.base_url, folder, retrieval={"graph_origin": "llm"}))
    llm = make_llm(scripted.base_url, folder, max_retries=0)
    llm.ledger.path = run_dir / "ledger.csv"
    llm.ledger.run_id = run
    embedder = Embedder(settings.embeddings, llm.cache, llm.ledger, llm.settings)
    return SimpleNamespace(
        settings=settings, run_id=run, run_dir=run_dir, ledger=llm.ledger, llm=llm, embedder=embedder
    )


@pytest.fixture
def served(scripted, upstream_systems):
    scripted.default_reply = reply  # its embeddings: 3-dimensional vectors
    return scripted


def answer(ctx, names=("lightrag_hku_hybrid", "lightrag_hku_naive")):
    methods, unavailable = make_methods(list(names), kit_index(), ctx, ctx.settings.upstream)
    assert unavailable.empty, unavailable
    try:
        return methods, run_methods(methods, QUESTIONS)
    finally:
        methods[0].session.close()


def test_lightrag_answers_land_in_the_answers_table_in_kit_ids_and_its_calls_in_the_ledger(served, tmp_path):
    ctx = context(served, tmp_path, "run1")
    methods, answers = answer(ctx)
    assert set(answers["failure"]) == {""} and set(answers["text"]) == {ANSWER}
    hybrid = answers[answers["method"] == "lightrag_hku_hybrid"].iloc[0]
    assert set(hybrid["context_ids"]) <= set(KIT_CHUNK.values()) and hybrid["context_ids"]
    assert set(hybrid["context_entity_ids"]) <= {"e1", "e2", "e3"}
    assert hybrid["calls"] >= 2 and hybrid["prompt_tokens"] > 0  # keywords, then the answer
    notes = json.loads(hybrid["notes"])
    assert notes["system"] == "lightrag" and notes["unmapped_ids"] == 0
    assert notes["system_usage"]["calls"] == hybrid["calls"]  # LightRAG's own count agrees
    ledger = pd.read_csv(ctx.run_dir / "ledger.csv")
    answered = ledger[ledger["stage"] == "answer"]
    assert set(answered["method"]) == {"lightrag_hku_hybrid", "lightrag_hku_naive"}
    systems = systems_table(methods)
    assert systems.loc[0, "system"] == "lightrag" and systems.loc[0, "version"] == "1.5.7"
    assert (
        json.loads((ctx.run_dir / "systems.json").read_text())["lightrag"]["index"]["counts"]["entities"] == 3
    )


def test_a_repeated_run_pays_nothing_and_reuses_the_systems_index(served, tmp_path):
    answer(context(served, tmp_path, "run1"))
    sent = len(served.requests)
    ctx = context(served, tmp_path, "run2")
    _, answers = answer(ctx)
    assert len(served.requests) == sent  # every call replayed from the kit's cache
    assert (answers["calls"] == answers["cached_calls"]).all() and answers["calls"].gt(0).all()
    ledger = pd.read_csv(ctx.run_dir / "ledger.csv")
    assert ledger["cached"].all() and "upstream_index" not in set(ledger["stage"])  # index not rebuilt


def test_a_relative_index_store_holds_the_systems_index_where_the_kit_reads_it(served, tmp_path, monkeypatch):
    (tmp_path / WORKSPACE_FILE).write_text("runs: []\n")  # tmp_path is a project root, as `init` makes one
    monkeypatch.chdir(tmp_path)
    ctx = context(served, tmp_path, "run1")
    ctx.settings = ctx.settings.model_copy(
        update={"index": ctx.settings.index.model_copy(update={"store_path": "indexes"})}
    )
    answer(ctx, names=("lightrag_hku_naive",))
    folder = Path(json.loads((ctx.run_dir / "systems.json").read_text())["lightrag"]["index"]["folder"])
    assert folder.is_absolute() and folder.parent == tmp_path / "indexes" / "upstream"
    assert (folder / "manifest.json").is_file() and (folder / "kit_ids.json").is_file()


@pytest.mark.fault
def test_a_failed_system_call_is_a_recorded_failure_not_a_scored_answer(served, tmp_path):
    ctx = context(served, tmp_path, "run1")
    methods, _ = make_methods(["lightrag_hku_hybrid"], kit_index(), ctx, ctx.settings.upstream)
    served.script.extend([("status", 500)] * 20)  # the index is built: the query's calls fail
    try:
        answers = run_methods(methods, QUESTIONS[:1])
    finally:
        methods[0].session.close()
    row = answers.iloc[0]
    assert row["text"] == "" and row["failure"] != ""
    assert row["failures"][0]["stage"] == "system" and "lightrag query" in row["failures"][0]["detail"]


@pytest.mark.fault
def test_a_system_whose_index_cannot_be_built_is_an_unavailable_method_with_its_reason(served, tmp_path):
    ctx = context(served, tmp_path, "run1")
    ctx.embedder.embed(["dimension"], stage="embedding_dimension")  # the probe is cached: the build fails
    served.script.extend([("status", 500)] * 20)
    methods, unavailable = make_methods(["lightrag_hku_hybrid"], kit_index(), ctx, ctx.settings.upstream)
    assert methods == [] and unavailable.loc[0, "method"] == "lightrag_hku_hybrid"
    assert "lightrag: its index could not be built: lightrag index" in unavailable.loc[0, "reason"]


def test_kit_ids_map_a_systems_items_by_id_name_ends_and_text_and_count_the_rest():
    ids = KitIds(kit_index())
    chunk, missing = ids.item({"kind": "chunk", "text": GRAPH["chunks"][0]["text"], "id": "chunk-x"}, 0, "s")
    assert chunk.chunk_ids == ["c1"] and missing == 0
    entity, missing = ids.item({"kind": "entity", "id": "ADA LOVELACE", "name": "Ada Lovelace"}, 1, "s")
    assert entity.entity_ids == ["e1"] and missing == 0
    relation, missing = ids.item(
        {"kind": "relation", "id": "", "source": "London", "target": "ada lovelace"}, 2, "s"
    )
    assert relation.relation_ids == ["r1"] and missing == 0
    _, missing = ids.item({"kind": "entity", "name": "Nobody", "entity_ids": ["zz"]}, 3, "s")
    assert missing == 2


DULCE = SHARED_DATASETS / "graphrag_examples" / "operation_dulce"


@pytest.mark.usefixtures("upstream_systems")
def test_graphrag_searches_its_own_output_folder_and_answers_in_the_kits_ids(scripted, tmp_path):
    """GraphRAG (its own environment) over the Operation Dulce output the kit imported: one graph."""
    from test_graphrag_worker import graphrag_reply

    from ragtrial.index.import_graphs import import_graphrag_output

    scripted.default_reply = graphrag_reply
    ctx = context(scripted, tmp_path, "run1")
    ctx.settings = ctx.settings.model_copy(
        update={
            "index": ctx.settings.index.model_copy(
                update={"graph_source": "import", "import_path": str(DULCE)}
            ),
            "methods": ctx.settings.methods.model_copy(update={"global_level": 0}),
        }
    )
    index = import_graphrag_output(DULCE / "output")
    methods, unavailable = make_methods(
        ["graphrag_local", "graphrag_global"], index, ctx, ctx.settings.upstream
    )
    assert unavailable.empty, unavailable
    try:
        answers = run_methods(methods, QUESTIONS[:1]).set_index("method")
    finally:
        methods[0].session.close()
    assert set(answers["failure"]) == {""} and answers["text"].str.len().gt(0).all()
    local = answers.loc["graphrag_local"]
    assert local["context_entity_ids"] and set(local["context_entity_ids"]) <= set(
        index.entities["entity_id"]
    )
    assert set(local["context_ids"]) <= set(index.chunks["chunk_id"])
    assert set(answers.loc["graphrag_global", "context_community_ids"]) <= set(
        index.communities["community_id"]
    )
    assert answers.loc["graphrag_global", "context_community_ids"]
    for method, row in answers.iterrows():  # GraphRAG's own count (its SearchResult) agrees with the kit's
        assert row["calls"] > 0 and json.loads(row["notes"])["system_usage"]["calls"] == row["calls"], method
    built = json.loads((ctx.run_dir / "systems.json").read_text())["graphrag"]
    assert built["version"] == "3.3.0" and built["index"]["embedding_tokens"] > 0
