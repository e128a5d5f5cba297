"""The hipporag retriever: HippoRAG's single-step retrieval, checked against networkx's personalized
PageRank with HippoRAG's node specificity and passage scoring computed here independently.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from test_retrieval import graph_index, retriever

EDGES = [("Alice", "Bob"), ("Bob", "Carol"), ("Carol", "Dave"), ("Eve", "Frank")]
MENTIONS = {
    "c1": ["Alice", "Bob"],
    "c2": ["Bob", "Carol"],
    "c3": ["Carol", "Dave"],
    "c4": ["Alice"],
    "c5": ["Eve", "Frank"],
    "c6": [],
}


def test_passages_rank_by_the_pagerank_of_the_entities_they_mention():
    index = graph_index(EDGES, MENTIONS)
    found = retriever("hipporag", index, hipporag_damping=0.5).retrieve("What did Alice do?", 6)
    assert not found.fallback
    graph = nx.Graph()
    graph.add_nodes_from(n for ms in MENTIONS.values() for n in ms)
    graph.add_edges_from(EDGES)
    passages_of = {n: sum(n in ms for ms in MENTIONS.values()) for n in graph}
    # the question links Alice only; her weight is 1 / (passages mentioning her), normalized away
    rank = nx.pagerank(graph, alpha=0.5, personalization={"Alice": 1 / passages_of["Alice"]}, tol=1e-10)
    expected = {c: sum(rank[n] for n in ms) for c, ms in MENTIONS.items()}
    shown = [item.chunk_ids[0] for item in found.items]
    scores = [item.score for item in found.items]
    # networkx starts from the uniform vector: unreachable nodes keep a vanishing remainder
    assert shown == sorted((c for c in expected if expected[c] > 1e-9), key=lambda c: -expected[c])
    assert scores == pytest.approx([expected[c] for c in shown], abs=1e-5)
    assert "c5" not in shown and "c6" not in shown  # Eve and Frank are unreachable from Alice


def test_seeds_are_weighted_by_node_specificity():
    index = graph_index(EDGES, MENTIONS)
    found = retriever("hipporag", index, hipporag_damping=0.5).retrieve("Alice and Bob", 6)
    graph = nx.Graph(EDGES)
    # Alice is in 2 passages, Bob in 2: equal weights; a linked entity mentioned more often counts less
    rank = nx.pagerank(graph, alpha=0.5, personalization={"Alice": 0.5, "Bob": 0.5}, tol=1e-10)
    expected = {c: sum(rank.get(n, 0.0) for n in ms) for c, ms in MENTIONS.items()}
    top = found.items[0].chunk_ids[0]
    assert top == max(expected, key=lambda c: expected[c])
    assert np.isclose(found.items[0].score, expected[top], atol=1e-5)


def test_a_question_linking_no_entity_falls_back_and_says_so():
    index = graph_index(EDGES, MENTIONS)
    found = retriever("hipporag", index).retrieve("Nothing here matches", 3)
    assert found.fallback.endswith("-> vector")
