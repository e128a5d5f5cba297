"""llama-index on the kit's index: the model doors, NaiveRAG agreement, KG triplets, the indexed store."""

from __future__ import annotations

import dataclasses

import numpy as np
from conftest import make_llm
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import KG_SOURCE_REL
from test_retrieval import CHAIN, CHAIN_MENTIONS, EMBEDDER, graph_index, nlp_index, retriever

from ragtrial.data.synthetic import generate_corpus
from ragtrial.index.chunk_documents import chunk_documents
from ragtrial.index.embed_index import embed_index
from ragtrial.index.tables import GraphIndex
from ragtrial.retrieval.llamaindex_bridge import (
    KitEmbedding,
    KitLLM,
    SeedPathRetriever,
    naive_rag_llamaindex,
    property_graph_store,
    triplet_rank,
)

QUESTIONS = [
    "Which company acquired Durfeim Foundry?",
    "Who founded a maker of drones?",
    "Where was Sotail held?",
    "Who works with Beilun?",
    "apple",
]


def test_llamaindex_vector_index_returns_the_same_top_k_as_vector():
    dataset, _ = generate_corpus("small", seed=0)
    documents = dataset.documents_frame()
    index = embed_index(
        GraphIndex(documents=documents, chunks=chunk_documents(documents, chunk_size=128, overlap=0)),
        EMBEDDER.embed,
    )
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
    assert [i.text for i in plain.items] == [
        "Alvor -> Alvor works with Beilun. -> Beilun",
        "Beilun -> Beilun works with Cairdo. -> Cairdo",
    ]
    assert [i.score for i in plain.items] == [1.0, 0.5] and plain.items[1].relation_ids == ["r-Beilun-Cairdo"]
    with_text = retriever("kg_triplets", index, hops=2, kg_with_source_text=True).retrieve(
        "Who works with Alvor?", 3
    )
    assert [i.kind for i in with_text.items] == ["triplet", "triplet", "chunk"]
    assert with_text.items[2].chunk_ids == ["c5"]  # the only chunk naming both Beilun and Cairdo
    assert (
        retriever("kg_triplets", index).retrieve("What is the meaning of life?", 3).fallback
        == "no usable entity -> vector"
    )


def test_indexed_store_gives_the_parents_results():
    edges = [
        ("Alvor", "Beilun"),
        ("Beilun", "Cairdo"),
        ("Cairdo", "Alvor"),
        ("Cairdo", "Durmask"),
        ("Eskel", "Durmask"),
        ("Fanrir", "Eskel"),
    ]
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
            assert keys(indexed.get_rel_map(nodes, depth=depth, limit=None)) == keys(
                parent.get_rel_map(nodes, depth=depth, limit=None)
            )


def ranked_by_get_rel_map(
    store: SimplePropertyGraphStore, seeds: list[str], top_k: int, max_depth: int
) -> dict[int, tuple[list[tuple[float, str]], int]]:
    """SeedPathRetriever's definition, the long way, per path depth up to `max_depth`: every triplet
    llama-index's own `get_rel_map` reaches, ranked by the hop that first reached it, then
    `triplet_rank`; the first top_k as (score, relation id), and the hops walked to reach top_k.
    """
    nodes = store.get(ids=seeds)
    first_hop: dict[str, tuple[int, object]] = {}
    for depth in range(1, max_depth + 1):  # get_rel_map(depth) extends get_rel_map(depth - 1)
        for triplet in store.get_rel_map(nodes, depth=depth, limit=None, ignore_rels=[KG_SOURCE_REL]):
            first_hop.setdefault(triplet[1].properties["relation_id"], (depth - 1, triplet))
    ranked = sorted(first_hop.values(), key=lambda ht: (ht[0], triplet_rank(ht[1])))
    out = {}
    for depth in range(max_depth + 1):
        within = [(1.0 / (1 + hop), t[1].properties["relation_id"]) for hop, t in ranked if hop < depth]
        walked = next((d for d in range(1, depth + 1) if sum(hop < d for hop, _ in ranked) >= top_k), depth)
        out[depth] = within[:top_k], walked
    return out


def test_seed_paths_rank_what_llamaindex_get_rel_map_reaches():
    """SeedPathRetriever reads only each node's first top_k triplets; it returns what ranking every
    triplet llama-index's `get_rel_map` reaches returns. NLP graph of the small corpus: hubs, tied
    weights, and some relations labelled KG_SOURCE_REL (walked through, never returned).
    """
    index, _ = nlp_index()
    entities, relations = index.entities, index.relations.copy()
    relations["description"] = [
        KG_SOURCE_REL if i % 7 == 0 else d for i, d in enumerate(relations["description"])
    ]
    store = property_graph_store(dataclasses.replace(index, relations=relations), list(entities["entity_id"]))
    parent = SimplePropertyGraphStore(store.graph)
    degree = relations["source_id"].value_counts().add(relations["target_id"].value_counts(), fill_value=0)
    by_degree = list(degree.sort_values(kind="stable").index)
    assert degree.max() > 40 and degree.min() <= 2  # hubs beyond the largest top_k, and leaves
    rng = np.random.default_rng(0)
    seed_sets = [
        [by_degree[-1]],
        [by_degree[0]],
        [by_degree[0], by_degree[-1]],
        by_degree[:3],
        [],
        ["nobody"],
    ]
    seed_sets += [
        [str(e) for e in rng.choice(by_degree, size=int(rng.integers(1, 4)), replace=False)] for _ in range(8)
    ]
    for seeds in seed_sets:
        for top_k in (1, 3, 5, 40):
            expected = ranked_by_get_rel_map(parent, seeds, top_k, max_depth=3)
            for depth, (ranked, walked) in expected.items():
                paths = SeedPathRetriever(store, seeds, depth, top_k)
                got = [(n.score, n.node.metadata["relation_id"]) for n in paths.retrieve("unused")]
                assert (got, paths.hops_walked) == (ranked, walked), (seeds, top_k, depth)


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
