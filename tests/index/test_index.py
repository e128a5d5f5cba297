import hashlib
import json

import numpy as np
import pandas as pd
import pytest

import ragtrial.index.tables as index_module
from ragtrial.index.chunk_documents import chunk_documents, documents_as_chunks
from ragtrial.index.create_communities import create_communities
from ragtrial.index.embed_index import embed_index
from ragtrial.index.extract_nlp_graph import extract_nlp_graph
from ragtrial.index.tables import SCHEMAS, GraphIndex, config_hash, conform_table, empty_tables
from ragtrial.llm.tokens import get_encoding
from ragtrial.records import Document, records_frame

DIM = 16


def fake_embed(texts: list[str], method: str = "") -> np.ndarray:
    """Deterministic stand-in for the kit's embedder: a vector seeded by each text's hash."""
    seeds = [int(hashlib.sha256(t.encode()).hexdigest()[:8], 16) for t in texts]
    return np.stack([np.random.default_rng(s).normal(size=DIM) for s in seeds]) * 3  # not normalized


def documents(*texts: str) -> pd.DataFrame:
    docs = [
        Document(doc_id=f"d{i}", title=f"Doc {i}", text=t, metadata={"n": i}) for i, t in enumerate(texts)
    ]
    return records_frame(docs, Document)


LONG = " ".join(f"word{i}" for i in range(1500))


# ---------------------------------------------------------------- chunking


def test_chunks_have_size_overlap_and_cover_the_document():
    chunks = chunk_documents(documents(LONG), chunk_size=600, overlap=100)
    enc = get_encoding()
    tokens = [enc.encode(t) for t in chunks["text"]]
    n = len(enc.encode(LONG))
    assert all(len(t) == 600 for t in tokens[:-1]) and 0 < len(tokens[-1]) <= 600
    assert list(chunks["n_tokens"]) == [len(t) for t in tokens]
    for before, after in zip(tokens, tokens[1:], strict=False):
        assert before[-100:] == after[:100]
    assert sum(chunks["n_tokens"]) - 100 * (len(chunks) - 1) == n  # the last window ends at the end
    assert "".join([chunks["text"][0]] + [enc.decode(t[100:]) for t in tokens[1:]]) == LONG


def test_chunk_ids_are_stable_and_carry_provenance():
    docs = documents(LONG, "A short document.", "")
    first, again = chunk_documents(docs), chunk_documents(docs)
    pd.testing.assert_frame_equal(first, again)
    assert first["chunk_id"].is_unique
    assert list(first.query("doc_id == 'd0'")["position"]) == list(range((first["doc_id"] == "d0").sum()))
    short = first.query("doc_id == 'd1'")
    assert list(short["text"]) == ["A short document."] and list(short["position"]) == [0]
    assert "d2" not in set(first["doc_id"])  # an empty document has nothing to retrieve
    other = chunk_documents(docs, chunk_size=300, overlap=50)
    assert not set(other["chunk_id"]) & set(first["chunk_id"])


def test_chunking_rejects_bad_overlap():
    with pytest.raises(ValueError, match="overlap"):
        chunk_documents(documents(LONG), chunk_size=100, overlap=100)


def test_documents_as_chunks_keeps_each_document_whole():
    chunks = documents_as_chunks(documents(LONG, "Short."))
    assert list(chunks["text"]) == [LONG, "Short."] and list(chunks["position"]) == [0, 0]


# ---------------------------------------------------------------- schema


def test_empty_tables_follow_the_contract():
    tables = empty_tables()
    assert set(tables) == set(SCHEMAS)
    for name, frame in tables.items():
        assert list(frame.columns) == list(SCHEMAS[name]) and frame.empty
    assert list(tables["documents"].columns) == list(Document.model_fields)
    assert (
        tables["chunks"]["n_tokens"].dtype == np.int64 and tables["relations"]["weight"].dtype == np.float64
    )


def test_conform_table_rejects_wrong_columns_and_duplicate_keys():
    chunks = chunk_documents(documents("One doc."))
    with pytest.raises(ValueError, match="missing columns \\['n_tokens'\\]"):
        conform_table("chunks", chunks.drop(columns="n_tokens"))
    with pytest.raises(ValueError, match="unexpected \\['extra'\\]"):
        conform_table("chunks", chunks.assign(extra=1))
    with pytest.raises(ValueError, match="duplicate chunk_id"):
        conform_table("chunks", pd.concat([chunks, chunks]))


def test_config_hash_ignores_key_order():
    assert config_hash({"a": 1, "b": {"c": 2, "d": 3}}) == config_hash({"b": {"d": 3, "c": 2}, "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})


# ---------------------------------------------------------------- a full index


TEXT = (
    "Ada Lovelace worked with Charles Babbage in London. Babbage designed the Analytical Engine. "
    "Mary Somerville introduced Ada Lovelace to Charles Babbage. Michael Faraday lectured in London."
)


@pytest.fixture(scope="module")
def full_index() -> GraphIndex:
    docs = documents(TEXT, "Charles Babbage met Michael Faraday at the Royal Society in London.")
    chunks = chunk_documents(docs, chunk_size=20, overlap=5)
    entities, relations = extract_nlp_graph(chunks)
    communities = create_communities(entities, relations)
    first = communities.iloc[0]
    reports = pd.DataFrame(
        [
            {
                "community_id": first["community_id"],
                "level": first["level"],
                "title": "Engines",
                "summary": "About.",
                "findings": [{"summary": "s", "explanation": "e"}],
                "rating": 7.5,
                "full_text": "# Engines",
                "entity_ids": first["entity_ids"],
                "chunk_ids": first["chunk_ids"],
            }
        ]
    )
    claims = pd.DataFrame(
        [
            {
                "claim_id": "cl1",
                "subject_id": entities["entity_id"][0],
                "object_id": None,
                "claim_type": "FACT",
                "status": "TRUE",
                "start_date": None,
                "end_date": None,
                "description": "d",
                "chunk_ids": [chunks["chunk_id"][0]],
            }
        ]
    )
    failures = pd.DataFrame(
        [
            {
                "chunk_id": chunks["chunk_id"][1],
                "stage": "extract",
                "kind": "invalid_json",
                "detail": "reply was not JSON",
            }
        ]
    )
    index = GraphIndex(
        documents=docs,
        chunks=chunks,
        entities=entities,
        relations=relations,
        claims=claims,
        communities=communities,
        community_reports=reports,
        extraction_failures=failures,
        manifest={"settings": {"chunk_size": 20}, "ledger": {"calls": 0}},
    )
    return embed_index(index, fake_embed)


def test_embed_index_fills_normalized_embeddings_in_table_order(full_index):
    for array, n in [
        (full_index.chunk_embeddings, len(full_index.chunks)),
        (full_index.entity_embeddings, len(full_index.entities)),
        (full_index.report_embeddings, 1),
    ]:
        assert array.shape == (n, DIM) and array.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(array, axis=1), 1, rtol=1e-5)
    row = full_index.entities.iloc[2]
    expected = fake_embed([f"{row['name']}: {row['description']}"])[0]
    np.testing.assert_allclose(
        full_index.entity_embeddings[2], expected / np.linalg.norm(expected), rtol=1e-5
    )
    assert embed_index(GraphIndex(), fake_embed).chunk_embeddings is None


def test_embedding_rows_must_match_the_table(full_index):
    with pytest.raises(ValueError, match="chunk_embeddings"):
        GraphIndex(chunks=full_index.chunks, chunk_embeddings=np.zeros((1, DIM), np.float32))


def test_save_load_round_trip_is_identical(full_index, tmp_path):
    path = full_index.save(tmp_path / "idx")
    loaded = GraphIndex.load(path)
    for table in SCHEMAS:
        assert len(getattr(full_index, table)) > 0, table
        pd.testing.assert_frame_equal(getattr(loaded, table), getattr(full_index, table))
    for attr in ("chunk_embeddings", "entity_embeddings", "report_embeddings"):
        np.testing.assert_array_equal(getattr(loaded, attr), getattr(full_index, attr))
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["counts"]["entities"] == len(full_index.entities)
    assert manifest["config_hash"] == config_hash({"chunk_size": 20}) and manifest["ledger"] == {"calls": 0}
    assert manifest["source_fingerprint"] == index_module.fingerprint_documents(full_index.documents)
    assert loaded.documents["metadata"][1] == {"n": 1}
    loaded.save(tmp_path / "again")  # re-saving a loaded index reproduces the same files
    assert (tmp_path / "again" / "manifest.json").read_text() == (path / "manifest.json").read_text()


def test_interrupted_save_leaves_no_partial_folder(full_index, tmp_path, monkeypatch):
    full_index.save(tmp_path / "idx")
    before = sorted(p.name for p in (tmp_path / "idx").iterdir())

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(index_module.np, "save", crash)  # tables are written, embeddings are not
    with pytest.raises(KeyboardInterrupt):
        full_index.save(tmp_path / "new")
    with pytest.raises(KeyboardInterrupt):
        full_index.save(tmp_path / "idx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # no "new", no temp folders
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == before
    GraphIndex.load(tmp_path / "idx")


def test_load_names_the_missing_file(full_index, tmp_path):
    for name in ("relations.parquet", "reports.npy", "manifest.json"):
        path = full_index.save(tmp_path / name)
        (path / name).unlink()
        with pytest.raises(FileNotFoundError, match=name):
            GraphIndex.load(path)


def test_to_networkx_sums_parallel_relations_and_is_cached():
    entities = pd.DataFrame(
        {
            "entity_id": ["a", "b"],
            "name": ["A", "B"],
            "type": "",
            "description": "",
            "chunk_ids": [["c"], ["c"]],
            "degree": 1,
            "origin": "llm",
        }
    )
    relations = pd.DataFrame(
        {
            "relation_id": ["r1", "r2"],
            "source_id": ["a", "b"],
            "target_id": ["b", "a"],
            "description": "",
            "weight": [2.0, 3.0],
            "chunk_ids": [["c"], ["c"]],
        }
    )
    index = GraphIndex(entities=entities, relations=relations)
    graph = index.to_networkx()
    assert graph is index.to_networkx()
    assert graph.nodes["a"]["name"] == "A" and graph.number_of_edges() == 1
    assert graph.edges["a", "b"]["weight"] == 5.0 and graph.edges["a", "b"]["relation_ids"] == ["r1", "r2"]
