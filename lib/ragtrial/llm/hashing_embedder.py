"""Deterministic, model-free embeddings for benchmarks and tests at scale."""

from __future__ import annotations

import numpy as np
from sklearn.feature_extraction.text import HashingVectorizer


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
