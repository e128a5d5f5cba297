"""llama-index on the kit's index: the model doors, NaiveRAG agreement, KG triplets, the indexed store."""

from __future__ import annotations

import numpy as np
from conftest import make_llm
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from test_retrieval import CHAIN, CHAIN_MENTIONS, EMBEDDER, graph_index, retriever

from ragtrial.index import GraphIndex, chunk_documents, embed_index
from ragtrial.llamaindex_bridge import KitEmbedding, KitLLM, naive_rag_llamaindex, property_graph_store
from ragtrial.synthetic import generate_corpus

QUESTIONS = ["Which company acquired Durfeim Foundry?", "Who founded a maker of drones?", "Where was Sotail held?",
             "Who works with Beilun?", "apple"]


def test_llamaindex_vector_index_returns_the_same_top_k_as_vector():
    dataset, _ = generate_corpus("small", seed=0)
    documents = dataset.documents_frame()
    index = embed_index(GraphIndex(documents=documents, chunks=chunk_documents(documents, chunk_size=128, overlap=0)),
                        lambda texts: EMBEDDER.embed(texts))
    ours = retriever("vector", index)
    theirs = naive_rag_llamaindex(index, EMBEDDER, k=4)
    for question in QUESTIONS + [q.question for q in dataset.questions]:
        expected = ours.retrieve(question, 4)
        got = theirs.retrieve(question)
        assert [n.node.node_id for n in got] == expected.chunk_ids, question
        assert np.allclose([n.score for n in got], [i.score for i in expected.items], atol=1e-5)
    wrapped = retriever("vector_llamaindex", index)
    assert wrapped.retrieve(QUESTIONS[0], 2).chunk_ids == ours.retrieve(QUESTIONS[0], 2).chunk_ids


def test_kg_triplets_returns_triplets_and_their_source_text_when_asked():
    index = graph_index(CHAIN, CHAIN_MENTIONS)
    plain = retriever("kg_triplets", index, hops=2).retrieve("Who works with Alvor?", 3)
    assert [i.kind for i in plain.items] == ["triplet"] * 2
    # First hop: the triplet touching the seed; second hop (llama-index follows subject -> object).
    assert [i.text for i in plain.items] == ["Alvor -> Alvor works with Beilun. -> Beilun",
                                             "Beilun -> Beilun works with Cairdo. -> Cairdo"]
    assert [i.score for i in plain.items] == [1.0, 0.5] and plain.items[1].relation_ids == ["r-Beilun-Cairdo"]
    with_text = retriever("kg_triplets", index, hops=2, kg_with_source_text=True).retrieve("Who works with Alvor?", 3)
    assert [i.kind for i in with_text.items] == ["triplet", "triplet", "chunk"]
    assert with_text.items[2].chunk_ids == ["c5"]  # the only chunk naming both Beilun and Cairdo
    assert retriever("kg_triplets", index).retrieve("What is the meaning of life?", 3).fallback == \
        "no usable entity -> vector"


def test_indexed_store_gives_the_parents_results():
    edges = [("Alvor", "Beilun"), ("Beilun", "Cairdo"), ("Cairdo", "Alvor"), ("Cairdo", "Durmask"),
             ("Eskel", "Durmask"), ("Fanrir", "Eskel")]
    index = graph_index(edges, {"c1": ["Alvor", "Beilun", "Cairdo"], "c2": ["Durmask", "Eskel", "Fanrir"]})
    names = list(index.entities["name"])
    indexed = property_graph_store(index, names)
    parent = SimplePropertyGraphStore(indexed.graph)

    def keys(triplets):
        return sorted((s.id, r.id, o.id) for s, r, o in triplets)

    for seeds in (["Alvor"], ["Durmask", "Fanrir"], ["Nobody"], []):
        assert sorted(n.id for n in indexed.get(ids=seeds)) == sorted(n.id for n in parent.get(ids=seeds))
        assert keys(indexed.get_triplets(ids=seeds)) == keys(parent.get_triplets(ids=seeds))
        assert keys(indexed.get_triplets(entity_names=seeds)) == keys(parent.get_triplets(entity_names=seeds))
        for depth in (1, 2, 3):
            nodes = parent.get(ids=seeds)
            assert keys(indexed.get_rel_map(nodes, depth=depth, limit=None)) == \
                keys(parent.get_rel_map(nodes, depth=depth, limit=None))


def test_kit_llm_and_embedding_go_through_the_kit(scripted, tmp_path):
    scripted.default_reply = lambda body: "Paris"
    llm = make_llm(scripted.base_url, tmp_path)
    kit_llm = KitLLM(llm, stage="synonyms", method="kg_triplets", max_tokens=8)
    assert kit_llm.complete("The capital of France is").text == "Paris"
    assert [r.text for r in kit_llm.stream_complete("The capital of France is")] == ["Paris"]
    rows = llm.ledger.frame()
    assert list(rows["cached"]) == [False, True] and set(rows["stage"]) == {"synonyms"}
    assert set(rows["method"]) == {"kg_triplets"} and len(scripted.chat_requests()) == 1
    assert scripted.chat_requests()[0]["body"]["max_tokens"] == 8
    embedding = KitEmbedding(EMBEDDER)
    assert np.allclose(embedding.get_query_embedding("Alvor"), EMBEDDER.embed(["Alvor"])[0])
    assert np.allclose(embedding.get_text_embedding_batch(["a b", "c d"]), EMBEDDER.embed(["a b", "c d"]))
