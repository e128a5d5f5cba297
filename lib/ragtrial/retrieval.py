"""Retrievers: the LLM-free core every retrieval-and-answer method is built on.

A retriever turns a question into ranked `ContextItem`s (the contract in docs/design.md). This module
holds the contract, the passage retrievers (`vector` = NaiveRAG, `bm25`, `hybrid`), reciprocal rank
fusion, and the registry; the graph retrievers live in `ragtrial.graph_retrieval` (graph walk,
fast-graphrag), `ragtrial.context_builders` (GraphRAG local search, LightRAG) and
`ragtrial.llamaindex_bridge` (LlamaIndex KG triplets). Everything a query needs (matrices, BM25 weights,
adjacency) is computed when a retriever is built, so a query costs one question embedding plus a
few sparse products.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import CountVectorizer, HashingVectorizer
from threadpoolctl import ThreadpoolController

from ragtrial.config import RetrievalSettings
from ragtrial.index import GraphIndex
from ragtrial.llm import LLM
from ragtrial.phrases import stop_words

# ---------------------------------------------------------------- the contract


@dataclass
class ContextItem:
    """One piece of context a method shows the generator."""

    kind: str  # chunk | entity | relation | claim | triplet | community_report | map_answer
    text: str
    score: float
    retriever: str  # which retriever produced it (vector, bm25, graph_walk, ...)
    chunk_ids: list[str] = field(default_factory=list)
    entity_ids: list[str] = field(default_factory=list)
    relation_ids: list[str] = field(default_factory=list)
    community_ids: list[str] = field(default_factory=list)


@dataclass
class Retrieval:
    """What a retriever returns for one question."""

    items: list[ContextItem]  # ranked, best first
    fallback: str = ""  # non-empty when the retriever fell back (e.g. "no usable entity -> vector")
    notes: dict[str, Any] = field(default_factory=dict)  # e.g. seeds found, hops walked

    @property
    def chunk_ids(self) -> list[str]:
        """Chunks the items cite, in rank order, each once (what retrieval recall is measured on)."""
        return list(dict.fromkeys(c for item in self.items for c in item.chunk_ids))


class Retriever(Protocol):
    name: str

    def retrieve(self, question: str, k: int) -> Retrieval: ...


class Embeds(Protocol):
    """What retrievers need of an embedder: `ragtrial.llm.Embedder` or `HashingEmbedder`."""

    def embed(self, texts: list[str], *, stage: str, method: str = "") -> np.ndarray: ...


@dataclass
class RetrieverParts:
    """The model doors a retriever may use; `llm` only for retrievers that call a model themselves."""

    embedder: Embeds
    llm: LLM | None = None


class HashingEmbedder:
    """Deterministic, model-free embeddings: signed feature hashing of character 3-5-grams within
    word boundaries (scikit-learn's HashingVectorizer), L2-normalized float32. For benchmarks and
    tests that need embeddings at scale without a model; similar spellings get similar vectors,
    synonyms do not.
    """

    model_name = "hashing-char-3-5"

    def __init__(self, n_features: int = 384):  # all-MiniLM-L6-v2's width: products cost what they would
        self._vectorizer = HashingVectorizer(
            analyzer="char_wb",
            ngram_range=(3, 5),
            n_features=n_features,
            alternate_sign=True,
            norm="l2",
            lowercase=True,
        )

    def embed(self, texts: list[str], *, stage: str = "", method: str = "") -> np.ndarray:
        return self._vectorizer.transform(texts).toarray().astype(np.float32)


# ---------------------------------------------------------------- ranking helpers

_THREADPOOLS = ThreadpoolController()


def one_blas_thread(retrieve: Callable) -> Callable:
    """Run a query on one BLAS thread. Query-time products are small (a question against the
    chunk matrix); on a shared 2-core machine OpenBLAS's thread hand-off made them 4-50x slower
    than one thread (measured: 27 ms vs 7 ms for 18k x 384 @ 384), at ~0.5 ms per call to switch.
    """

    @functools.wraps(retrieve)
    def single_threaded(*args, **kwargs):
        with _THREADPOOLS.limit(limits=1, user_api="blas"):
            return retrieve(*args, **kwargs)

    return single_threaded


def top_k(scores: np.ndarray, k: int, positive_only: bool = False) -> np.ndarray:
    """Indices of the `k` highest scores, best first; ties go to the lower index (table order), so
    the same scores always give the same ranking.
    """
    pool = np.flatnonzero(scores > 0) if positive_only else None  # None: every row (no index copy)
    pooled = scores if pool is None else scores[pool]
    if len(pooled) > k > 0:
        kth = np.partition(pooled, len(pooled) - k)[len(pooled) - k]
        candidates = np.flatnonzero(pooled >= kth)
    else:
        candidates = np.arange(len(pooled))
    if pool is not None:
        candidates = pool[candidates]
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order][: max(k, 0)]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], rrf_k: int = 60) -> list[tuple[str, float]]:
    """RRF (Cormack, Clarke & Buettcher 2009): score(d) = sum over lists of 1 / (rrf_k + rank of d),
    ranks from 1. Ties keep the order of first appearance (list by list), so fusion is deterministic.
    """
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (rrf_k + rank)
    order = {key: i for i, key in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


def join_fallbacks(fallbacks: Iterable[str]) -> str:
    return "; ".join(f for f in dict.fromkeys(fallbacks) if f)


# ---------------------------------------------------------------- passages


class ChunkTable:
    """Chunk ids and texts in table order, and the ContextItem for a chunk row."""

    def __init__(self, index: GraphIndex):
        self.ids: list[str] = list(index.chunks["chunk_id"])
        self.texts: list[str] = list(index.chunks["text"])
        self.row_of = {cid: i for i, cid in enumerate(self.ids)}

    def item(self, row: int, score: float, retriever: str) -> ContextItem:
        return ContextItem(
            kind="chunk",
            text=self.texts[row],
            score=float(score),
            retriever=retriever,
            chunk_ids=[self.ids[row]],
        )

    def ranked(self, rows: Iterable[int], scores: np.ndarray, retriever: str) -> list[ContextItem]:
        return [self.item(int(r), scores[r], retriever) for r in rows]


def embed_question(embedder: Embeds, question: str, method: str) -> np.ndarray:
    return embedder.embed([question], stage="retrieval", method=method)[0]


class VectorRetriever:
    """NaiveRAG: cosine similarity between the question and every chunk embedding, top k."""

    name = "vector"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        if index.chunk_embeddings is None:
            raise ValueError(
                "vector retrieval needs chunk embeddings: embed the index first (index.embed_index)"
            )
        self.chunks = ChunkTable(index)
        self.matrix = np.ascontiguousarray(index.chunk_embeddings, dtype=np.float32)
        self.embedder = parts.embedder

    def scores(self, question: str) -> np.ndarray:
        # Both sides are L2-normalized, so the dot product is the cosine.
        return self.matrix @ embed_question(self.embedder, question, self.name)

    @one_blas_thread
    def retrieve(self, question: str, k: int) -> Retrieval:
        scores = self.scores(question)
        return Retrieval(self.chunks.ranked(top_k(scores, k), scores, self.name))


def bm25_tokens(text: str) -> list[str]:
    """The BM25 tokenizer: case-folded runs of letters and digits (Unicode; '_' and punctuation split
    words), NLTK's English stop words removed, no stemming. "Tom's CEO-era" -> ["tom", "ceo", "era"]
    ('s' is a stop word).
    """
    return [t for t in re.findall(r"[^\W_]+", text.casefold()) if t not in stop_words()]


class BM25Retriever:
    """BM25 Okapi over chunk tokens (`bm25_tokens`), as a precomputed sparse weight matrix.

    weight(t, d) = idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl)), with Lucene's
    non-negative idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)). A question scores each chunk by the
    sum of its tokens' weights (a repeated question token counts again, as in rank_bm25); chunks
    sharing no token with the question score 0 and are not returned.
    """

    name = "bm25"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        self.chunks = ChunkTable(index)
        k1, b = settings.bm25_k1, settings.bm25_b
        counter = CountVectorizer(analyzer=bm25_tokens)
        tf = sparse.csr_matrix(counter.fit_transform(self.chunks.texts), dtype=np.float64)
        self.vocabulary: dict[str, int] = counter.vocabulary_
        n_docs = tf.shape[0]
        lengths = np.asarray(tf.sum(axis=1)).ravel()
        avgdl = lengths.mean() if n_docs else 0.0
        df = np.bincount(tf.indices, minlength=tf.shape[1])
        self.idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
        rows = np.repeat(np.arange(n_docs), np.diff(tf.indptr))
        norm = k1 * (1 - b + b * lengths[rows] / (avgdl or 1.0))
        weights = self.idf[tf.indices] * tf.data * (k1 + 1) / (tf.data + norm)
        # Columns are what a query selects, so keep the weights column-major.
        self.weights = sparse.csr_matrix((weights, tf.indices, tf.indptr), shape=tf.shape).tocsc()

    def scores(self, question: str) -> np.ndarray:
        terms = [self.vocabulary[t] for t in bm25_tokens(question) if t in self.vocabulary]
        if not terms:
            return np.zeros(self.weights.shape[0])
        columns, counts = np.unique(terms, return_counts=True)
        return np.asarray(self.weights[:, columns] @ counts.astype(np.float64)).ravel()

    @one_blas_thread
    def retrieve(self, question: str, k: int) -> Retrieval:
        scores = self.scores(question)
        return Retrieval(self.chunks.ranked(top_k(scores, k, positive_only=True), scores, self.name))


def fuse(name: str, retrievals: Sequence[Retrieval], chunks: ChunkTable, k: int, rrf_k: int) -> Retrieval:
    """RRF of ranked chunk lists; an item's score is its fused score."""
    rankings = [[c for item in r.items if item.kind == "chunk" for c in item.chunk_ids] for r in retrievals]
    fused = reciprocal_rank_fusion(rankings, rrf_k)[:k]
    return Retrieval(
        [chunks.item(chunks.row_of[c], s, name) for c, s in fused],
        fallback=join_fallbacks(r.fallback for r in retrievals),
        notes={"fused": [r.notes for r in retrievals]},
    )


class HybridRetriever:
    """Vector + keyword (BM25) ranked lists merged by reciprocal rank fusion; each list
    contributes its top `rrf_depth` chunks.
    """

    name = "hybrid"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        self.vector = VectorRetriever(index, parts, settings)
        self.keyword = BM25Retriever(index, parts, settings)
        self.depth, self.rrf_k = settings.rrf_depth, settings.rrf_k

    @one_blas_thread
    def retrieve(self, question: str, k: int) -> Retrieval:
        lists = [r.retrieve(question, max(k, self.depth)) for r in (self.vector, self.keyword)]
        return fuse(self.name, lists, self.vector.chunks, k, self.rrf_k)


# ---------------------------------------------------------------- registry

# name -> "module:Class"; resolved on use, so building a vector retriever never imports llama-index.
RETRIEVERS: dict[str, str] = {
    "vector": "ragtrial.retrieval:VectorRetriever",
    "bm25": "ragtrial.retrieval:BM25Retriever",
    "hybrid": "ragtrial.retrieval:HybridRetriever",
    "graph_walk": "ragtrial.graph_retrieval:GraphWalkRetriever",
    "graph_hybrid": "ragtrial.graph_retrieval:GraphHybridRetriever",
    "local_search": "ragtrial.context_builders:LocalSearchRetriever",
    "lightrag": "ragtrial.context_builders:LightRAGRetriever",
    "fastgraphrag": "ragtrial.graph_retrieval:FastGraphRAGRetriever",
    "kg_triplets": "ragtrial.llamaindex_bridge:KGTripletRetriever",
    "vector_llamaindex": "ragtrial.llamaindex_bridge:LlamaIndexVectorRetriever",
}


def make_retriever(
    name: str, index: GraphIndex, ctx_or_parts: Any, settings: RetrievalSettings | None = None
) -> Retriever:
    """Build the retriever `name` over `index`. `ctx_or_parts` is a RunContext (its embedder, llm
    and `settings.retrieval` are used) or a `RetrieverParts`; `settings` overrides the run's.
    """
    if name not in RETRIEVERS:
        raise ValueError(f"unknown retriever {name!r}; known: {', '.join(RETRIEVERS)}")
    if isinstance(ctx_or_parts, RetrieverParts):
        parts = ctx_or_parts
    else:
        parts = RetrieverParts(embedder=ctx_or_parts.embedder, llm=ctx_or_parts.llm)
        settings = settings or ctx_or_parts.settings.retrieval
    module, cls = RETRIEVERS[name].split(":")
    return getattr(importlib.import_module(module), cls)(index, parts, settings or RetrievalSettings())
