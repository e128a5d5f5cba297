"""Passage retrievers: `vector` (NaiveRAG: cosine over chunk embeddings), `bm25` and `hybrid`
(vector + BM25 by reciprocal rank fusion).
"""

from __future__ import annotations

import re

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import CountVectorizer

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.index.phrases import stop_words
from ragtrial.index.tables import GraphIndex
from ragtrial.retrieval.base import ChunkTable, Embeds, Retrieval, RetrieverParts, one_blas_thread, top_k
from ragtrial.retrieval.fusion import FusedRetriever


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


class HybridRetriever(FusedRetriever):
    """Vector + keyword (BM25) ranked lists merged by reciprocal rank fusion."""

    name = "hybrid"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        vector = VectorRetriever(index, parts, settings)
        super().__init__([vector, BM25Retriever(index, parts, settings)], vector.chunks, settings)
