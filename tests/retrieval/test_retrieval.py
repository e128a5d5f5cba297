"""Retrievers on hand-built indexes whose right answers can be worked out by hand."""

from __future__ import annotations

import dataclasses
import json

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from conftest import batch_runs, make_llm

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.data.synthetic import generate_corpus
from ragtrial.index.chunk_documents import chunk_documents
from ragtrial.index.embed_index import embed_index
from ragtrial.index.extract_nlp_graph import extract_nlp_graph
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.errors import StructuredOutputError
from ragtrial.llm.hashing_embedder import HashingEmbedder
from ragtrial.llm.tokens import count_tokens
from ragtrial.retrieval.base import Retrieval, RetrieverParts, top_k
from ragtrial.retrieval.entity_graph import row_indices
from ragtrial.retrieval.fusion import reciprocal_rank_fusion
from ragtrial.retrieval.graph_walk import hop_distances
from ragtrial.retrieval.packing import pack
from ragtrial.retrieval.passages import bm25_tokens
from ragtrial.retrieval.ppr import PersonalizedPageRank
from ragtrial.retrieval.registry import RETRIEVERS, make_retriever

EMBEDDER = HashingEmbedder()


def graph_index(
    edges: list[tuple[str, str]],
    mentions: dict[str, list[str]],
    names: list[str] | None = None,
    reports: pd.DataFrame | None = None,
    describe: str = "{} is an entity of the test graph.",
) -> GraphIndex:
    """Entities named `names` (default: every name in edges and mentions), one relation per edge,
    one chunk per `mentions` key whose text names the entities listed for it.
    """
    names = names or list(
        dict.fromkeys([n for e in edges for n in e] + [n for ms in mentions.values() for n in ms])
    )
    texts = {
        c: (" and ".join(ms) + " appear in this passage.") if ms else "A passage about nothing in particular."
        for c, ms in mentions.items()
    }
    chunks = pd.DataFrame(
        {
            "chunk_id": list(mentions),
            "doc_id": [f"doc-{c}" for c in mentions],
            "position": 0,
            "text": list(texts.values()),
            "n_tokens": [count_tokens(t) for t in texts.values()],
        }
    )
    documents = pd.DataFrame(
        {
            "doc_id": chunks["doc_id"],
            "title": "",
            "text": chunks["text"],
            "source": "test",
            "date": None,
            "metadata": [{} for _ in mentions],
        }
    )
    degree = {n: sum(n in e for e in edges) for n in names}
    entities = pd.DataFrame(
        {
            "entity_id": [f"e-{n}" for n in names],
            "name": names,
            "type": "thing",
            "description": [describe.format(n) for n in names],
            "chunk_ids": [[c for c, ms in mentions.items() if n in ms] for n in names],
            "degree": [degree[n] for n in names],
            "origin": "nlp",
        }
    )
    relations = pd.DataFrame(
        {
            "relation_id": [f"r-{a}-{b}" for a, b in edges],
            "source_id": [f"e-{a}" for a, _ in edges],
            "target_id": [f"e-{b}" for _, b in edges],
            "description": [f"{a} works with {b}." for a, b in edges],
            "weight": 1.0,
            "chunk_ids": [[c for c, ms in mentions.items() if a in ms and b in ms] for a, b in edges],
        }
    )
    extra = {} if reports is None else {"community_reports": reports}
    index = GraphIndex(documents=documents, chunks=chunks, entities=entities, relations=relations, **extra)
    return embed_index(index, EMBEDDER.embed)


def nlp_index() -> tuple[GraphIndex, list[str]]:
    """The small generated corpus with its NLP graph (hubs, tied weights) and hashing embeddings,
    and its questions.
    """
    dataset, _ = generate_corpus("small", seed=0)
    documents = dataset.documents_frame()
    chunks = chunk_documents(documents, chunk_size=128, overlap=0)
    entities, relations = extract_nlp_graph(chunks)
    index = GraphIndex(documents=documents, chunks=chunks, entities=entities, relations=relations)
    return embed_index(index, EMBEDDER.embed), [q.question for q in dataset.questions]


def retriever(name: str, index: GraphIndex, **settings):
    return make_retriever(name, index, RetrieverParts(EMBEDDER), RetrievalSettings(**settings))


CHAIN = [("Alvor", "Beilun"), ("Beilun", "Cairdo"), ("Cairdo", "Durmask")]
CHAIN_MENTIONS = {
    "c1": ["Alvor"],
    "c2": ["Beilun"],
    "c3": ["Cairdo"],
    "c4": ["Durmask"],
    "c5": ["Beilun", "Cairdo"],
    "c6": [],
}


# ---------------------------------------------------------------- fusion and ranking


def test_rrf_matches_hand_computed_scores():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], rrf_k=60)
    # a: 1/61 + 1/62, c: 1/63 + 1/61, b: 1/62, d: 1/63
    assert [key for key, _ in fused] == ["a", "c", "b", "d"]
    assert [s for _, s in fused] == pytest.approx([0.0325224749, 0.0322664585, 0.0161290323, 0.0158730159])


def test_rrf_breaks_ties_by_first_appearance_and_top_k_by_table_order():
    assert [key for key, _ in reciprocal_rank_fusion([["x", "y"], ["y", "x"]])] == ["x", "y"]
    assert list(top_k(np.array([0.5, 0.9, 0.5, 0.9, 0.1]), 3)) == [1, 3, 0]
    assert list(top_k(np.array([0.0, 2.0, 0.0]), 3, positive_only=True)) == [1]


def test_top_k_is_the_head_of_a_full_sort():
    rng = np.random.default_rng(0)
    for n in (0, 1, 7, 300):
        scores = rng.integers(-3, 4, size=n).astype(np.float32)  # many ties, some non-positive
        for positive_only in (False, True):
            ranked = [
                int(i) for i in np.lexsort((np.arange(n), -scores)) if scores[i] > 0 or not positive_only
            ]
            for k in (0, 1, 5, n, n + 1):
                assert list(top_k(scores, k, positive_only)) == ranked[:k], (n, positive_only, k)


@pytest.mark.parametrize("keyword", ["bm25", "ts_rank"])
def test_hybrid_and_graph_hybrid_are_the_rrf_of_their_parts(keyword):
    index = graph_index(CHAIN, CHAIN_MENTIONS)
    for name, parts in (("hybrid", ("vector", keyword)), ("graph_hybrid", ("graph_walk", "hybrid"))):
        fused = retriever(name, index, rrf_depth=6, keyword=keyword).retrieve("Who works with Alvor?", 3)
        lists = [
            retriever(p, index, keyword=keyword).retrieve("Who works with Alvor?", 6).chunk_ids for p in parts
        ]
        expected = reciprocal_rank_fusion(lists, 60)[:3]
        assert [(item.chunk_ids[0], item.score) for item in fused.items] == [
            (c, pytest.approx(s)) for c, s in expected
        ]


# ---------------------------------------------------------------- BM25


def test_bm25_matches_hand_computed_okapi_scores():
    chunks = pd.DataFrame(
        {
            "chunk_id": ["d1", "d2", "d3"],
            "doc_id": ["d1", "d2", "d3"],
            "position": 0,
            "text": ["apple banana apple", "banana cherry", "cherry date elderberry fig"],
            "n_tokens": 4,
        }
    )
    bm25 = retriever("bm25", GraphIndex(chunks=chunks), bm25_k1=1.5, bm25_b=0.75)
    # N=3, avgdl=3. idf(apple) = ln(1 + 2.5/1.5) = 0.980829, idf(cherry) = ln(1 + 1.5/2.5) = 0.470004
    # d1: 0.980829 * 2*2.5 / (2 + 1.5*(0.25 + 0.75*3/3))  = 1.401185
    # d2: 0.470004 * 2.5 / (1 + 1.5*(0.25 + 0.75*2/3))    = 0.552945
    # d3: 0.470004 * 2.5 / (1 + 1.5*(0.25 + 0.75*4/3))    = 0.408699
    assert bm25.scores("Apple cherry?") == pytest.approx([1.401185, 0.552945, 0.408699], abs=1e-6)
    found = bm25.retrieve("apple cherry", 5)
    assert found.chunk_ids == ["d1", "d2", "d3"]
    assert (
        bm25.retrieve("zebra", 5).items == []
    )  # no shared token: nothing retrieved, not 3 zero-score chunks


def test_ts_rank_matches_postgres_default_ts_rank_by_hand():
    chunks = pd.DataFrame(
        {
            "chunk_id": ["d1", "d2", "d3", "d4"],
            "doc_id": ["d1", "d2", "d3", "d4"],
            "position": 0,
            "text": [
                "apple banana apple",
                "banana cherry",
                "cherry date elderberry fig",
                "apple apple apple",
            ],
            "n_tokens": 4,
        }
    )
    ts_rank = retriever("ts_rank", GraphIndex(chunks=chunks))
    # ts_rank(to_tsvector(text), 'apple | cherry'), weights D=0.1, normalization 0: per matched term
    # 0.1 * sum_{i<=tf} 1/i^2 / (pi^2/6), summed, divided by the 2 distinct query terms (the repeat
    # of "apple" does not count again). No idf, no length normalization: d2 and d3 tie.
    zeta2 = np.pi**2 / 6
    expected = [
        0.1 * (1 + 1 / 4) / zeta2 / 2,
        0.1 / zeta2 / 2,
        0.1 / zeta2 / 2,
        0.1 * (1 + 1 / 4 + 1 / 9) / zeta2 / 2,
    ]
    assert ts_rank.scores("Apple cherry, apple?") == pytest.approx(expected, rel=1e-12)
    assert ts_rank.retrieve("apple cherry", 5).chunk_ids == ["d4", "d1", "d2", "d3"]
    assert ts_rank.retrieve("zebra", 5).items == []
    # BM25 on the same chunks normalizes by length: the shorter d2 outscores d3.
    bm25 = retriever("bm25", GraphIndex(chunks=chunks)).scores("apple cherry")
    assert bm25[1] > bm25[2]


def test_bm25_tokenizer_folds_case_splits_punctuation_and_drops_stop_words():
    assert bm25_tokens("Tom's CEO-era, at_the Bank of the West!") == ["tom", "ceo", "era", "bank", "west"]


# ---------------------------------------------------------------- graph walk


def test_graph_walk_scores_chunks_by_one_over_one_plus_hops():
    found = retriever("graph_walk", graph_index(CHAIN, CHAIN_MENTIONS), hops=2).retrieve(
        "Where is Alvor based?", 10
    )
    # Alvor is the seed (hop 0), Beilun hop 1, Cairdo hop 2, Durmask beyond the walk.
    assert [(i.chunk_ids[0], i.score) for i in found.items] == [
        ("c1", pytest.approx(1.0)),
        ("c5", pytest.approx(1 / 2 + 1 / 3)),
        ("c2", pytest.approx(0.5)),
        ("c3", pytest.approx(1 / 3)),
    ]
    assert found.fallback == "" and found.notes["seeds"] == ["Alvor"] and found.notes["max_hops"] == 2


def test_hub_cap_stops_the_walk_at_a_hub():
    star = [("Alvor", "Hubrein"), ("Hubrein", "Xalu"), ("Hubrein", "Yorn"), ("Hubrein", "Zeth")]
    mentions = {"c1": ["Alvor"], "c2": ["Hubrein"], "c3": ["Xalu"], "c4": ["Yorn"], "c5": ["Zeth"]}
    index = graph_index(star, mentions)
    free = retriever("graph_walk", index, hops=2).retrieve("Tell me about Alvor", 10)
    capped = retriever("graph_walk", index, hops=2, hub_degree_cap=3).retrieve("Tell me about Alvor", 10)
    assert set(free.chunk_ids) == {"c1", "c2", "c3", "c4", "c5"}
    assert set(capped.chunk_ids) == {"c1", "c2"}  # the hub itself is reached, not walked through
    assert capped.notes["hubs_not_walked"] == 1
    # A seed that is itself a hub is not walked from either.
    graph = retriever("graph_walk", index).graph
    hub = graph.row_of["e-Hubrein"]
    assert list(
        np.flatnonzero(hop_distances(graph.adjacency, graph.degree, [hub], 2, hub_degree_cap=3) >= 0)
    ) == [hub]


def test_no_usable_entity_falls_back_to_vector_and_says_so():
    index = graph_index(CHAIN, CHAIN_MENTIONS)
    questions = ["What is the meaning of life?", "Who works with Beilun?", "Why is the sky blue?"]
    results = [retriever("graph_walk", index).retrieve(q, 2) for q in questions]
    assert [bool(r.fallback) for r in results] == [True, False, True]
    assert results[0].fallback == "no usable entity -> vector" and results[0].notes["seeds"] == []
    assert results[0].chunk_ids == retriever("vector", index).retrieve(questions[0], 2).chunk_ids


@pytest.mark.fault
def test_without_vector_fallback_a_graph_retriever_shows_no_context_and_says_so():
    index = graph_index(CHAIN, CHAIN_MENTIONS)
    question = "What is the meaning of life?"
    walk = retriever("graph_walk", index, graph_fallback="none").retrieve(question, 2)
    assert walk.items == [] and walk.fallback == "no usable entity -> no context"
    # graph + hybrid then shows hybrid's list alone (vector is not fused in a second time).
    fused = retriever("graph_hybrid", index, graph_fallback="none").retrieve(question, 3)
    assert fused.fallback == "no usable entity -> no context"
    assert fused.chunk_ids == retriever("hybrid", index).retrieve(question, 3).chunk_ids
    with_vector = retriever("graph_hybrid", index).retrieve(question, 3)
    assert with_vector.fallback == "no usable entity -> vector"


def two_graph_index() -> GraphIndex:
    """A graph_source "both" index: an NLP graph (Alvor - Beilun) and an LLM graph (Alvor - Zephyra)
    that both name "Alvor", with namespaced ids, as the index build makes them.
    """
    mentions = {"c1": ["Alvor"], "c2": ["Beilun"], "c3": ["Alvorllm", "Zephyra"], "c4": []}
    index = graph_index([("Alvor", "Beilun"), ("Alvorllm", "Zephyra")], mentions)
    llm_side = index.entities["name"].isin(["Alvorllm", "Zephyra"])
    entities = index.entities.assign(
        origin=np.where(llm_side, "llm", "nlp"), name=index.entities["name"].replace("Alvorllm", "Alvor")
    )
    return dataclasses.replace(index, entities=entities)


def test_the_graph_walked_is_a_setting_and_both_means_each_graph():
    index = two_graph_index()
    question = "Where is Alvor based?"
    # By default the walk starts in every graph of the index, not in the one whose entity comes first.
    assert retriever("graph_walk", index).retrieve(question, 5).chunk_ids == ["c3", "c1", "c2"]
    walked = {
        origin: retriever("graph_walk", index, graph_origin=origin).retrieve(question, 5)
        for origin in ("nlp", "llm", "both")
    }
    assert walked["nlp"].chunk_ids == ["c1", "c2"] and walked["nlp"].notes["seeds"] == ["Alvor"]
    assert walked["llm"].chunk_ids == ["c3"]
    # "both": the mention seeds its entity in each graph; the walk stays within each.
    assert walked["both"].chunk_ids == ["c3", "c1", "c2"] and walked["both"].notes["seeds"] == ["Alvor"] * 2
    assert [
        retriever(n, index, graph_origin=o).graph_origin
        for n in ("graph_walk", "graph_hybrid")
        for o in ("nlp", "both")
    ] == ["nlp", "nlp+llm", "nlp", "nlp+llm"]
    assert retriever("hybrid", index).graph_origin == ""
    with pytest.raises(ValueError, match=r"retrieval\.graph_origin is 'import'.*its graphs: nlp, llm"):
        retriever("graph_walk", index, graph_origin="import")


def test_entities_listed_once_by_the_model_are_linked_in_each_graph(scripted, tmp_path):
    scripted.default_reply = lambda body: '{"entities": ["alvor"]}'
    llm = make_llm(scripted.base_url, tmp_path)
    walk = make_retriever(
        "graph_walk",
        two_graph_index(),
        RetrieverParts(EMBEDDER, llm),
        RetrievalSettings(entity_source="llm", graph_origin="both"),
    )
    found = walk.retrieve("Where is it based?", 5)
    assert found.chunk_ids == ["c3", "c1", "c2"] and len(scripted.chat_requests()) == 1


def test_entities_listed_by_the_model_are_linked_cached_and_ledgered(scripted, tmp_path):
    scripted.default_reply = lambda body: '{"entities": ["alvor", "Nobody Known"]}'
    llm = make_llm(scripted.base_url, tmp_path)
    index = graph_index(CHAIN, CHAIN_MENTIONS)
    walk = make_retriever(
        "graph_walk", index, RetrieverParts(EMBEDDER, llm), RetrievalSettings(entity_source="llm")
    )
    first = walk.retrieve("Where does the founder of it live?", 3)
    again = walk.retrieve("Where does the founder of it live?", 3)
    assert first.notes["seeds"] == ["Alvor"] and first.notes["links"] == ["exact"]
    assert again.chunk_ids == first.chunk_ids and len(scripted.chat_requests()) == 1
    rows = llm.ledger.frame()
    assert list(rows["stage"]) == ["question_entities"] * 2 and list(rows["cached"]) == [False, True]
    assert set(rows["method"]) == {"graph_walk"} and set(rows["prompt"]) == {"question_entities@v1"}


def test_an_unparseable_entity_listing_raises_instead_of_becoming_no_entities(scripted, tmp_path):
    scripted.default_reply = lambda body: "Alvor, I think"
    llm = make_llm(scripted.base_url, tmp_path)
    walk = make_retriever(
        "graph_walk",
        graph_index(CHAIN, CHAIN_MENTIONS),
        RetrieverParts(EMBEDDER, llm),
        RetrievalSettings(entity_source="llm"),
    )
    with pytest.raises(StructuredOutputError):
        walk.retrieve("Who works with Alvor?", 3)
    assert len(scripted.chat_requests()) == 2  # the reply and one repair round


# ---------------------------------------------------------------- personalized PageRank


def test_ppr_ranks_the_seeds_neighbours_first():
    edges = [
        ("Seedor", "Nalu"),
        ("Seedor", "Neth"),
        ("Nalu", "Farn"),
        ("Neth", "Forl"),
        ("Farn", "Forl"),
        ("Farn", "Gask"),
        ("Forl", "Gask"),
        ("Gask", "Hurm"),
    ]
    index = graph_index(edges, {"c1": ["Seedor", "Nalu"], "c2": ["Farn", "Gask"], "c3": ["Hurm"]})
    found = retriever("fastgraphrag", index).retrieve("What did Seedor do?", 3)
    entities = [i.text.split(":")[0] for i in found.items if i.kind == "entity"]
    assert entities[0] == "Seedor" and set(entities[1:3]) == {"Nalu", "Neth"}
    relations = [i for i in found.items if i.kind == "relation"]
    assert set(relations[0].entity_ids) <= {"e-Seedor", "e-Nalu", "e-Neth"}
    assert [i.chunk_ids for i in found.items if i.kind == "chunk"][0] == ["c1"]


def test_ppr_agrees_with_networkx():
    rng = np.random.default_rng(0)
    graph = nx.gnm_random_graph(40, 90, seed=1)
    for a, b in graph.edges:
        graph.edges[a, b]["weight"] = float(rng.uniform(0.5, 3))
    graph.add_node(40)  # an isolated (dangling) node
    adjacency = nx.to_scipy_sparse_array(graph, nodelist=range(41), weight="weight", format="csr")
    seeds = {3: 1.0, 17: 0.5}
    ours = PersonalizedPageRank(adjacency)(np.array([seeds.get(i, 0.0) for i in range(41)]), 0.85, 200, 1e-10)
    theirs = nx.pagerank(graph, alpha=0.85, personalization=seeds, tol=1e-10, max_iter=200, weight="weight")
    assert ours == pytest.approx([theirs[i] for i in range(41)], abs=1e-8)


# ---------------------------------------------------------------- local search and LightRAG


def reports_for(groups: dict[str, list[str]], words: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "community_id": list(groups),
            "level": 0,
            "title": [f"Community {c}" for c in groups],
            "summary": "",
            "findings": [[] for _ in groups],
            "rating": 5.0,
            "full_text": [" ".join(["report"] * words) for _ in groups],
            "entity_ids": [[f"e-{n}" for n in ns] for ns in groups.values()],
            "chunk_ids": [[] for _ in groups],
        }
    )


def test_local_search_respects_each_share_of_the_token_budget():
    names = [f"Ent{i}" for i in range(12)]
    edges = [(names[i], names[j]) for i in range(12) for j in range(i + 1, 12) if (i + j) % 3 == 0]
    mentions = {f"c{i}": [names[i], names[(i + 1) % 12]] for i in range(12)}
    reports = reports_for({"A": names[:6], "B": names[6:]}, words=30)
    index = graph_index(edges, mentions, names, reports, describe="{} " + "is described at some length " * 4)
    claims = pd.DataFrame(
        {
            "claim_id": ["k1"],
            "subject_id": ["e-Ent3"],
            "object_id": [None],
            "claim_type": ["FACT"],
            "status": ["TRUE"],
            "start_date": [None],
            "end_date": [None],
            "description": ["Ent3 was founded in 1990."],
            "chunk_ids": [["c3"]],
        }
    )
    index = dataclasses.replace(index, claims=claims)
    found = retriever(
        "local_search", index, local_max_tokens=300, local_community_prop=0.2, local_text_unit_prop=0.4
    ).retrieve("Ent3 and Ent7", 10)
    tokens = {
        kind: sum(count_tokens(i.text) for i in found.items if i.kind == kind)
        for kind in ("community_report", "entity", "relation", "claim", "chunk")
    }
    assert found.notes["budgets"] == {"community": 60, "local": 120, "text_unit": 120}
    assert 0 < tokens["community_report"] <= 60
    assert 0 < tokens["entity"] and tokens["entity"] + tokens["relation"] + tokens["claim"] <= 120
    assert [i.entity_ids for i in found.items if i.kind == "claim"] == [["e-Ent3"]]
    assert 0 < tokens["chunk"] <= 120
    kinds = [i.kind for i in found.items]
    assert kinds == sorted(kinds, key=["community_report", "entity", "relation", "claim", "chunk"].index)
    assert found.notes["tokens"] == {k: v for k, v in tokens.items() if v}


def test_lightrag_returns_each_kind_within_its_budget():
    index = graph_index(CHAIN, CHAIN_MENTIONS)
    found = retriever("lightrag", index, lightrag_tokens_per_kind=40).retrieve(
        "How does Beilun work with others?", 2
    )
    assert found.notes["low_level"] == ["Beilun"] and "work" in found.notes["high_level"]
    for kind in ("entity", "relation", "chunk"):
        shown = [i for i in found.items if i.kind == kind]
        assert shown and sum(count_tokens(i.text) for i in shown) <= 40
    assert "e-Beilun" in [e for i in found.items if i.kind == "entity" for e in i.entity_ids]


def lightrag_by_definition(lightrag, question: str, k: int) -> list:
    """LightRAG hybrid's context the long way: relation-major products, every relation and chunk of
    the found entities sorted in full, each kind's ids de-duplicated, then cut to its budget.
    """
    g = lightrag.graph
    low, high, _ = lightrag.keywords(question)
    entities, relations, chunk_rows = [], [], []
    if low:
        entity_vectors = np.ascontiguousarray(lightrag.entity_vectors_t.T)
        found = [int(e) for e in top_k(entity_vectors @ EMBEDDER.embed([", ".join(low)])[0], k)]
        entities += found
        relations += [int(r) for r in g.by_rank(g.incident(found))]
        for e in found:
            shared = np.asarray(g.mentions[row_indices(g.adjacency, e)].sum(axis=0)).ravel()
            chunk_rows += sorted((int(c) for c in row_indices(g.mentions, e)), key=lambda c: (-shared[c], c))
    if high:
        relation_vectors = np.ascontiguousarray(lightrag.relation_vectors_t.T)
        found = [int(r) for r in g.by_rank(top_k(relation_vectors @ EMBEDDER.embed([", ".join(high)])[0], k))]
        relations += found
        entities += [int(e) for r in found for e in (g.src[r], g.tgt[r])]
        chunk_rows += [int(c) for r in found for c in row_indices(g.rel_chunks, r)]
    budget = lightrag.settings.lightrag_tokens_per_kind
    return (
        pack([g.entity_item(e, g.degree[e], "lightrag") for e in dict.fromkeys(entities)], budget)[0]
        + pack(
            [
                g.relation_item(r, g.weight[r], "lightrag", lightrag.chunk_ids(g.rel_chunks, r))
                for r in dict.fromkeys(relations)
            ],
            budget,
        )[0]
        + pack([lightrag.chunks.item(c, 1.0, "lightrag") for c in dict.fromkeys(chunk_rows)], budget)[0]
    )


def test_lightrag_gives_the_context_of_its_definition():
    index, questions = nlp_index()
    questions += ["How does the weather change?", "Who works with Beilun?"]
    for budget in (40, 400, 4000):
        lightrag = retriever("lightrag", index, lightrag_tokens_per_kind=budget)
        for question in questions:
            for k in (1, 5):
                found = lightrag.retrieve(question, k)
                if not found.fallback:
                    assert found.items == lightrag_by_definition(lightrag, question, k), (budget, question, k)


def test_every_registered_retriever_answers_the_contract():
    index = graph_index(CHAIN, CHAIN_MENTIONS, reports=reports_for({"A": ["Alvor", "Beilun"]}, words=5))
    for name in (n for n in RETRIEVERS if RETRIEVERS.entry(n).metadata["library"] == "kit"):
        found = retriever(name, index).retrieve("Who works with Cairdo?", 2)
        assert isinstance(found, Retrieval) and found.items, name
        assert all(
            i.retriever == name and i.kind in {"chunk", "entity", "relation", "community_report"}
            for i in found.items
        ), name


def test_lightrag_searches_the_keywords_the_model_lists_for_the_question(scripted, tmp_path):
    """Seed 000's `params/paper_judge.yaml` (retrieval.lightrag_keywords llm): LightRAG asks the model
    for the question's low- and high-level keywords, one question_keywords request per question, and
    its entity search starts from the low-level ones the model named, not from the question's words.
    """
    cfg = batch_runs("params/paper_judge.yaml")[0].settings.retrieval
    assert cfg.lightrag_keywords == "llm"
    scripted.default_reply = lambda body: json.dumps(
        {"high_level_keywords": ["collaboration"], "low_level_keywords": ["Durmask"]}
    )
    llm = make_llm(scripted.base_url, tmp_path)
    lightrag = make_retriever(
        "lightrag", graph_index(CHAIN, CHAIN_MENTIONS), RetrieverParts(EMBEDDER, llm), cfg
    )
    found = lightrag.retrieve("How does Beilun work with others?", 2)
    (request,) = [r["body"] for r in scripted.chat_requests()]
    assert "Question: How does Beilun work with others?" in request["messages"][-1]["content"]
    assert found.notes["low_level"] == ["Durmask"] and found.notes["high_level"] == ["collaboration"]
    entities = [e for i in found.items if i.kind == "entity" for e in i.entity_ids]
    assert entities[0] == "e-Durmask"  # the named entity first; the question's "Beilun" is not a keyword
    assert set(llm.ledger.frame()["stage"]) == {"question_keywords"}
