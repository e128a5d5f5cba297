"""Passage retrievers: `vector` (NaiveRAG: cosine over chunk embeddings), the keyword scorers `bm25`
and `ts_rank` (Postgres full-text ranking), and `hybrid` (vector + a keyword scorer by reciprocal rank
fusion).
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


class KeywordRetriever:
    """A keyword scorer over chunk tokens (`bm25_tokens`), as a precomputed sparse matrix of term
    weights per chunk; subclasses say how a term's count in a chunk becomes its weight and how a
    question's tokens combine. Chunks sharing no token with the question score 0 and are not returned.
    """

    name = "keyword"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        self.chunks = ChunkTable(index)
        counter = CountVectorizer(analyzer=bm25_tokens)
        tf = sparse.csr_matrix(counter.fit_transform(self.chunks.texts), dtype=np.float64)
        self.vocabulary: dict[str, int] = counter.vocabulary_
        # Columns are what a query selects, so keep the weights column-major.
        self.weights = self.term_weights(tf, settings).tocsc()

    def term_weights(self, tf: sparse.csr_matrix, settings: RetrievalSettings) -> sparse.csr_matrix:
        raise NotImplementedError

    def query_terms(self, tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Vocabulary columns of the question's tokens and the factor each column is summed with."""
        raise NotImplementedError

    def scores(self, question: str) -> np.ndarray:
        tokens = bm25_tokens(question)
        columns, factors = self.query_terms(tokens)
        if not len(columns):
            return np.zeros(self.weights.shape[0])
        return np.asarray(self.weights[:, columns] @ factors).ravel()

    def known(self, tokens: list[str]) -> list[int]:
        return [self.vocabulary[t] for t in tokens if t in self.vocabulary]

    @one_blas_thread
    def retrieve(self, question: str, k: int) -> Retrieval:
        scores = self.scores(question)
        return Retrieval(self.chunks.ranked(top_k(scores, k, positive_only=True), scores, self.name))


def bm25_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    """Lucene's non-negative BM25 idf of terms found in `df` of `n_docs` chunks."""
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


class BM25Retriever(KeywordRetriever):
    """BM25 Okapi: weight(t, d) = idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl)), with
    Lucene's non-negative idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)). A question scores each chunk by
    the sum of its tokens' weights (a repeated question token counts again, as in rank_bm25).
    """

    name = "bm25"

    def term_weights(self, tf: sparse.csr_matrix, settings: RetrievalSettings) -> sparse.csr_matrix:
        k1, b = settings.bm25_k1, settings.bm25_b
        n_docs = tf.shape[0]
        lengths = np.asarray(tf.sum(axis=1)).ravel()
        avgdl = lengths.mean() if n_docs else 0.0
        idf = bm25_idf(np.bincount(tf.indices, minlength=tf.shape[1]), n_docs)
        rows = np.repeat(np.arange(n_docs), np.diff(tf.indptr))
        norm = k1 * (1 - b + b * lengths[rows] / (avgdl or 1.0))
        weights = idf[tf.indices] * tf.data * (k1 + 1) / (tf.data + norm)
        return sparse.csr_matrix((weights, tf.indices, tf.indptr), shape=tf.shape)

    def query_terms(self, tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
        columns, counts = np.unique(self.known(tokens), return_counts=True)
        return columns, counts.astype(np.float64)


# Postgres keeps at most 256 positions of a lexeme in a tsvector (MAXNUMPOS), so counts stop there.
TS_MAX_POSITIONS = 256
# ts_rank's default weight of a lexeme without a weight label (label D of {0.1, 0.2, 0.4, 1.0}).
TS_DEFAULT_WEIGHT = 0.1


class TsRankRetriever(KeywordRetriever):
    """Postgres `ts_rank(tsvector, tsquery)` with its defaults (weights {0.1, 0.2, 0.4, 1.0}, every
    lexeme label D; normalization 0, so no length normalization), for a query of the question's terms
    joined by OR (calc_rank_or in Postgres' tsrank.c): a term occurring tf times contributes
    0.1 * sum_{i=1..tf} 1/i^2 / (pi^2 / 6), and the sum is divided by the number of distinct query
    terms. No idf, and no k1-style saturation constant (the 1/i^2 series is bounded by pi^2/6). Terms
    are `bm25_tokens`, so the two keyword scorers differ in the scoring only (Postgres' english
    configuration would also stem).
    """

    name = "ts_rank"

    def term_weights(self, tf: sparse.csr_matrix, settings: RetrievalSettings) -> sparse.csr_matrix:
        series = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, TS_MAX_POSITIONS + 1) ** 2)])
        counts = np.minimum(tf.data, TS_MAX_POSITIONS).astype(np.int64)
        weights = TS_DEFAULT_WEIGHT * series[counts] / (np.pi**2 / 6)
        return sparse.csr_matrix((weights, tf.indices, tf.indptr), shape=tf.shape)

    def query_terms(self, tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
        # tsquery items are de-duplicated; every distinct term counts in the divisor, matched or not.
        distinct = len(set(tokens))
        columns = np.unique(self.known(tokens))
        return columns, np.full(len(columns), 1.0 / max(distinct, 1))


KEYWORD_SCORERS: dict[str, type[KeywordRetriever]] = {"bm25": BM25Retriever, "ts_rank": TsRankRetriever}


class HybridRetriever(FusedRetriever):
    """Vector + keyword (`retrieval.keyword`: BM25 or ts_rank) ranked lists merged by reciprocal rank
    fusion.
    """

    name = "hybrid"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        vector = VectorRetriever(index, parts, settings)
        keyword = KEYWORD_SCORERS[settings.keyword](index, parts, settings)
        super().__init__([vector, keyword], vector.chunks, settings)
