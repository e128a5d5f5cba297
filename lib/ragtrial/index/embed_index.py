"""The embedding step of the build: chunk, entity and report vectors, L2-normalized, in table order."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ragtrial.index.tables import EMBEDDINGS, GraphIndex

# ---------------------------------------------------------------- embeddings


def _normalized(array: np.ndarray, n: int, what: str) -> np.ndarray:
    array = np.asarray(array, dtype=np.float32)
    if array.ndim != 2 or len(array) != n:
        raise ValueError(f"embedding {what}: expected {n} rows, got shape {array.shape}")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1, norms)


def embed_index(index: GraphIndex, embed: Callable[[list[str]], np.ndarray]) -> GraphIndex:
    """Fill chunk ("text"), entity ("name: description") and report ("title: summary") embeddings,
    L2-normalized float32 in table order. An empty table keeps None (there is nothing to embed).
    """
    texts = {
        "chunks": list(index.chunks["text"]),
        "entities": [
            f"{n}: {d}" for n, d in zip(index.entities["name"], index.entities["description"], strict=True)
        ],
        "community_reports": [
            f"{t}: {s}"
            for t, s in zip(index.community_reports["title"], index.community_reports["summary"], strict=True)
        ],
    }
    arrays = {
        EMBEDDINGS[table][0]: _normalized(embed(values), len(values), table) if values else None
        for table, values in texts.items()
    }
    return dataclasses.replace(index, **arrays)
