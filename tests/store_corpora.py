"""The indexes the store tests compare in-database retrievers on, and the comparison itself.

Two corpora: the small generated corpus cut into 128-token chunks with its NLP graph (hubs, tied
weights, multi-hop questions), and a MuSiQue slice (HippoRAG's sample through the kit's loader: 12
questions, their gold passages and distractors, 120 passages, each one chunk) with its NLP graph.
Both have hashing embeddings (no model).
"""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest
from conftest import SHARED_DATASETS

from ragtrial.data.registry import load_dataset
from ragtrial.index.chunk_documents import chunk_documents, documents_as_chunks
from ragtrial.index.embed_index import embed_index
from ragtrial.index.extract_nlp_graph import extract_nlp_graph
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.hashing_embedder import HashingEmbedder
from ragtrial.retrieval.base import Retrieval

EMBEDDER = HashingEmbedder()
MUSIQUE = SHARED_DATASETS / "musique_sample_hipporag"


@dataclasses.dataclass(frozen=True)
class Corpus:
    name: str
    index: GraphIndex
    questions: tuple[str, ...]


def _indexed(name: str, documents, chunks, questions) -> Corpus:
    entities, relations = extract_nlp_graph(chunks)
    index = GraphIndex(documents=documents, chunks=chunks, entities=entities, relations=relations)
    return Corpus(name, embed_index(index, EMBEDDER.embed), tuple(questions))


@cache
def generated() -> Corpus:
    from ragtrial.data.synthetic import generate_corpus

    dataset, _ = generate_corpus("small", seed=0)
    documents = dataset.documents_frame()
    chunks = chunk_documents(documents, chunk_size=128, overlap=0)
    return _indexed("generated", documents, chunks, [q.question for q in dataset.questions])


@cache
def musique() -> Corpus:
    if not MUSIQUE.is_dir():
        pytest.skip(f"shared data set folder {MUSIQUE} is absent (real-data tests need the shared datasets)")
    dataset = load_dataset("musique", MUSIQUE, limit_questions=12, limit_documents=120)
    documents = dataset.documents_frame()
    return _indexed(
        "musique", documents, documents_as_chunks(documents), [q.question for q in dataset.questions]
    )


def corpora() -> list[Corpus]:
    return [generated(), musique()]


def ranking(found: Retrieval) -> list[str]:
    return [c for item in found.items for c in item.chunk_ids]


def assert_same_ranking(memory: Retrieval, store: Retrieval, where: str, rel: float = 1e-6) -> None:
    """The same chunks in the same order, scores equal up to `rel` (float32 vectors against float64)."""
    assert ranking(store) == ranking(memory), where
    for a, b in zip(memory.items, store.items, strict=True):
        assert b.score == pytest.approx(a.score, rel=rel, abs=1e-9), where
    assert store.fallback == memory.fallback, where


def assert_same_ranking_up_to_float4_ties(
    memory: Retrieval, store: Retrieval, memory_scores: dict[str, float], where: str
) -> None:
    """Postgres' ts_rank adds in float4: chunks whose float64 scores tie may come in another order
    (and another member of a tie at the k-th place may be kept). So: at every rank, the store's chunk
    scores (in memory) what the in-memory chunk at that rank scores, to float4 precision.
    """
    assert len(store.items) == len(memory.items), where
    for a, b in zip(memory.items, store.items, strict=True):
        assert memory_scores[b.chunk_ids[0]] == pytest.approx(a.score, rel=1e-6), where
        assert b.score == pytest.approx(a.score, rel=1e-6), where
