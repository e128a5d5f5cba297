"""The PostgreSQL store on a real server (the session's PostgreSQL, a fresh database per test): each
in-database retriever ranks as its in-memory twin on the generated corpus and a MuSiQue slice; a
write is all or nothing; a bad URL, a missing pgvector and a database that does not hold the layout
are said plainly.
"""

from __future__ import annotations

import logging

import psycopg
import pytest
from conftest import PROJECT_ROOT
from store_corpora import (
    EMBEDDER,
    assert_same_ranking,
    assert_same_ranking_up_to_float4_ties,
    corpora,
    generated,
)

from ragtrial.config.base import ParamsError
from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.config.settings import validate_settings
from ragtrial.config.store import StoreSettings
from ragtrial.index.database import (
    LAYOUT,
    LayoutError,
    StoreError,
    database,
    read_index,
    schema_columns,
    write_layout,
)
from ragtrial.index.embed_index import embed_index
from ragtrial.retrieval.base import Retrieval, RetrieverParts
from ragtrial.retrieval.fusion import fuse
from ragtrial.retrieval.registry import STORE_TWINS, make_retriever
from ragtrial.retrieval.stores.postgres import EXACT, PostgresIndexStore

MEMORY = RetrieverParts(EMBEDDER)
# Each twin under the settings that change its SQL (the keyword half, the fusion depth, the hub cap,
# one hop), each setting once.
VARIANTS = {
    "vector": [{}],
    "bm25": [{}],
    "ts_rank": [{}],
    "hybrid": [{}, {"keyword": "ts_rank", "rrf_depth": 5}],
    "graph_walk": [{}, {"hub_degree_cap": 3}, {"hops": 1}],
    "graph_hybrid": [{"keyword": "ts_rank", "hub_degree_cap": 3}],
}


def store_parts(url: str) -> RetrieverParts:
    return RetrieverParts(EMBEDDER, store=StoreSettings(retrieval="postgresql", url=url))


def test_every_postgresql_twin_ranks_as_its_in_memory_twin(postgres_url):
    """Exactly, but for ts_rank's float4 sums (`assert_same_ranking_up_to_float4_ties`); hybrid over
    ts_rank is checked as the kit's fusion of the vector list and Postgres' own ts_rank list.
    """
    parts = store_parts(postgres_url)
    assert set(VARIANTS) == set(STORE_TWINS["postgresql"])
    for corpus in corpora():
        for name, variants in VARIANTS.items():
            for variant in variants:
                settings = RetrievalSettings(**variant)
                memory = make_retriever(name, corpus.index, MEMORY, settings)
                store = make_retriever(name, corpus.index, parts, settings)
                assert store.name == f"{name}_postgresql"
                for question in corpus.questions:
                    where = f"{corpus.name} {name} {variant}: {question}"
                    expected, found = memory.retrieve(question, 6), store.retrieve(question, 6)
                    if name == "ts_rank":
                        scores = dict(zip(memory.chunks.ids, memory.scores(question), strict=True))
                        assert_same_ranking_up_to_float4_ties(expected, found, scores, where)
                    elif name == "hybrid" and settings.keyword == "ts_rank":
                        expected = hybrid_of(corpus.index, parts, settings, question, 6)
                        assert_same_ranking(expected, found, where)
                    else:
                        assert_same_ranking(expected, found, where)


def hybrid_of(index, parts, settings, question, k) -> Retrieval:
    """The kit's RRF of the in-memory vector list and the database's ts_rank list (hybrid's two halves)."""
    depth = max(k, settings.rrf_depth)
    vector = make_retriever("vector", index, MEMORY, settings)
    keyword = make_retriever("ts_rank", index, parts, settings)
    lists = [vector.retrieve(question, depth), keyword.retrieve(question, depth)]
    return fuse("hybrid_postgresql", lists, vector.chunks, k, settings.rrf_k)


def test_the_walk_notes_what_the_in_memory_walk_notes(postgres_url):
    corpus = generated()
    settings = RetrievalSettings(hub_degree_cap=3)
    memory = make_retriever("graph_walk", corpus.index, MEMORY, settings)
    store = make_retriever("graph_walk", corpus.index, store_parts(postgres_url), settings)
    for question in corpus.questions[:10]:
        a, b = memory.retrieve(question, 5).notes, store.retrieve(question, 5).notes
        assert {key: b[key] for key in a} == a
        assert "schema ragtrial_" in b["store"]


def test_missing_pgvector_is_exact_cosine_and_said(postgres_url, caplog):
    with caplog.at_level(logging.WARNING):
        store = PostgresIndexStore.open(StoreSettings(url=postgres_url), generated().index)
    assert store.vector_search == f"{EXACT} (pgvector is not installed on this server)"
    assert any("vector search by exact dot product" in r.getMessage() for r in caplog.records)
    found = make_retriever("vector", generated().index, store_parts(postgres_url)).retrieve(
        "Who founded it?", 3
    )
    assert "pgvector is not installed" in found.notes["store"]
    assert "***" in found.notes["store"] and store.db.url_password not in found.notes["store"]


def test_a_failed_write_leaves_nothing(postgres_url):
    index = generated().index
    broken = index.relations.copy()
    broken.loc[0, "source_id"] = "no-such-entity"  # the layout's foreign key refuses it mid-write
    import dataclasses

    with pytest.raises(StoreError, match="foreign key"):
        PostgresIndexStore.open(StoreSettings(url=postgres_url), dataclasses.replace(index, relations=broken))
    rows = database(postgres_url).rows(
        "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", ("ragtrial_%",)
    )
    assert rows == []


@pytest.mark.fault
def test_unusable_urls_are_named_without_their_password(postgres_server):
    wrong = postgres_server.url(password="not-the-password")
    with pytest.raises(StoreError) as err:
        PostgresIndexStore.open(StoreSettings(url=wrong), generated().index)
    assert "password authentication failed" in str(err.value) and "not-the-password" not in str(err.value)
    refused = f"postgresql://ragtrial:secret-pass@127.0.0.1:{postgres_server.port + 1}/none"
    with pytest.raises(StoreError, match="start the server") as err:
        PostgresIndexStore.open(StoreSettings(url=refused), generated().index)
    assert "secret-pass" not in str(err.value)
    with pytest.raises(ParamsError, match="key 'store.url': the PostgreSQL database is required"):
        validate_settings({"store": {"retrieval": "postgresql"}}, "params/x.yaml")
    with pytest.raises(ParamsError, match="key 'store.url'.*not a PostgreSQL URL"):
        validate_settings({"store": {"url": "mysql://u:p@h/db"}}, "params/x.yaml")


# ---------------------------------------------------------------- your own database


def own_schema(url: str, schema: str = "own") -> None:
    """A user's database holding the generated index in the documented layout (written as they would)."""
    db = database(url)
    with db.transaction() as conn:
        write_layout(conn, schema, generated().index, "double precision[]")


def test_your_own_database_is_read_as_it_is_and_searched_in_place(postgres_url):
    own_schema(postgres_url)
    db = database(postgres_url)
    before = schema_columns(db, "own")
    index = read_index(db, "own")
    original = generated().index
    assert sorted(index.chunks["chunk_id"]) == sorted(original.chunks["chunk_id"])
    assert set(index.relations["relation_id"]) == set(original.relations["relation_id"])
    by_id = dict(zip(original.entities["entity_id"], original.entities["chunk_ids"], strict=True))
    assert all(
        set(c) == set(by_id[e])
        for e, c in zip(index.entities["entity_id"], index.entities["chunk_ids"], strict=True)
    )
    assert index.chunk_embeddings is not None and index.manifest["database"]["schema"] == "own"
    parts = store_parts(postgres_url)
    for name in ("hybrid", "graph_walk"):
        memory, store = make_retriever(name, index, MEMORY), make_retriever(name, index, parts)
        for question in generated().questions[:8]:
            assert_same_ranking(
                memory.retrieve(question, 5), store.retrieve(question, 5), f"own {name} {question}"
            )
    assert schema_columns(db, "own") == before  # nothing was added to your schema
    search = PostgresIndexStore.open(parts.store, index)
    assert search.base == "own" and search.schema != "own"
    assert search.info["chunk_embeddings_schema"] == "own"  # your vectors, not the kit's


def test_your_own_database_without_vectors_is_searched_with_the_kits(postgres_url):
    own_schema(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP TABLE own.chunk_embeddings")
    index = read_index(database(postgres_url), "own")
    assert index.chunk_embeddings is None
    index = embed_index(index, EMBEDDER.embed, keep_existing=True)  # what database_index does
    store = PostgresIndexStore.open(StoreSettings(url=postgres_url), index)
    assert store.info["chunk_embeddings_schema"] == store.schema != "own"
    memory, found = (
        make_retriever("vector", index, MEMORY),
        make_retriever("vector", index, store_parts(postgres_url)),
    )
    for question in generated().questions[:5]:
        assert_same_ranking(memory.retrieve(question, 5), found.retrieve(question, 5), question)


@pytest.mark.fault
def test_a_database_not_in_the_layout_is_refused_naming_table_and_column(postgres_url):
    own_schema(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE own.chunks DROP COLUMN position")
        conn.execute("ALTER TABLE own.relations ALTER COLUMN weight TYPE text")
        conn.execute("DROP TABLE own.community_members")
    with pytest.raises(LayoutError) as err:
        read_index(database(postgres_url), "own")
    message = str(err.value)
    assert "chunks.position is missing (a integer column, required)" in message
    assert "relations.weight has type text, expected a float column" in message
    assert "table community_members is missing" in message
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA own CASCADE")
    own_schema(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for table in ("mentions", "relation_chunks", "chunk_embeddings"):
            conn.execute(f"ALTER TABLE own.{table} DROP CONSTRAINT {table}_chunk_id_fkey")
        conn.execute("INSERT INTO own.mentions SELECT entity_id, 'gone' FROM own.entities LIMIT 2")
        conn.execute("UPDATE own.chunk_embeddings SET embedding = ARRAY[1.0, 2.0] WHERE ctid IN "
                     "(SELECT ctid FROM own.chunk_embeddings LIMIT 1)")  # fmt: skip
    with pytest.raises(LayoutError) as err:
        read_index(database(postgres_url), "own")
    assert "mentions.chunk_id: 2 rows name no chunk_id of chunks, e.g. 'gone'" in str(err.value)
    assert "chunk_embeddings.embedding: vectors of different lengths" in str(err.value)
    with pytest.raises(LayoutError, match="schema nobody of .*: no such schema"):
        read_index(database(postgres_url), "nobody")


def test_the_documented_layout_is_the_loaders():
    text = (PROJECT_ROOT / "docs" / "stores.md").read_text()
    for table in LAYOUT.values():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{table.name}`")), "")
        assert row, table.name
        for column in table.columns:
            shown = f"**`{column.name}`**" if column.required else f"`{column.name}`"
            assert shown in row, f"{table.name}.{column.name}"


def test_store_retrieval_runs_each_twin_under_the_retrievers_own_name(postgres_url):
    """A run's settings (`store.retrieval`) choose the store for every retriever that has a twin."""
    from types import SimpleNamespace

    from ragtrial.config.settings import Settings

    store = {"retrieval": "postgresql", "url": postgres_url}
    run = SimpleNamespace(embedder=EMBEDDER, llm=None, settings=Settings.model_validate({"store": store}))
    index = generated().index
    assert make_retriever("hybrid", index, run).name == "hybrid_postgresql"
    assert make_retriever("local_search", index, run).name == "local_search"  # no twin: in memory
    run.settings = Settings()
    assert make_retriever("hybrid", index, run).name == "hybrid"
