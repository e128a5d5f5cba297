"""The embedding step of the build: chunk, entity and report vectors, L2-normalized, in table order.

Each call is labelled with what it embeds (the embedder's `method`): "chunks", "entities",
"community_reports"; in an index holding two graphs (`graph_source: both`) each origin's entities
and reports are embedded in a call of their own ("entities:nlp", "community_reports:llm", ...), so
the ledger says what each graph's vectors cost (`index.costs`). Vectors are cached per text, so the
split changes no vector.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ragtrial.index.tables import EMBEDDINGS, GraphIndex

# ---------------------------------------------------------------- embeddings


def _normalized(array: np.ndarray, n: int, what: str) -> np.ndarray:
    array = np.asarray(array, dtype=np.float32)
    if array.ndim != 2 or len(array) != n:
        raise ValueError(f"embedding {what}: expected {n} rows, got shape {array.shape}")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1, norms)


def report_origins(index: GraphIndex) -> list[str]:
    """The origin of each community report, in table order: its first member's ("" without members)."""
    origin_of = dict(zip(index.entities["entity_id"], index.entities["origin"], strict=True))
    return [origin_of.get(ids[0], "") if len(ids) else "" for ids in index.community_reports["entity_ids"]]


def embedding_label(table: str, origin: str, origins: int) -> str:
    """The ledger `method` of the call embedding `table`'s rows of one origin (of `origins` in the index)."""
    return f"{table}:{origin}" if origins > 1 and table != "chunks" else table


def chunk_texts(chunks: pd.DataFrame) -> tuple[list[str], list[str]]:
    """What a chunk's vector embeds (its text), and each text's origin (none: "")."""
    return list(chunks["text"]), [""] * len(chunks)


def entity_texts(entities: pd.DataFrame) -> tuple[list[str], list[str]]:
    """What an entity's vector embeds ("name: description"), and each entity's origin."""
    texts = [f"{n}: {d}" for n, d in zip(entities["name"], entities["description"], strict=True)]
    return texts, list(entities["origin"])


def report_texts(index: GraphIndex) -> tuple[list[str], list[str]]:
    """What a community report's vector embeds ("title: summary"), and each report's origin."""
    reports = index.community_reports
    texts = [f"{t}: {s}" for t, s in zip(reports["title"], reports["summary"], strict=True)]
    return texts, report_origins(index)


def embed_table(
    table: str, texts: list[str], origins: list[str], embed: Callable[..., np.ndarray]
) -> np.ndarray | None:
    """The L2-normalized float32 vectors of one table's `texts` in order, one `embed(texts,
    method=label)` call per origin (`embedding_label`); None when there is no text.
    """
    if not texts:
        return None
    keys = pd.Series([o if isinstance(o, str) else "" for o in origins])
    rows = pd.Series(range(len(texts))).groupby(keys, sort=False)
    vectors: np.ndarray | None = None
    for origin, positions in rows:
        group = [texts[i] for i in positions]
        label = embedding_label(table, str(origin), rows.ngroups)
        part = _normalized(embed(group, method=label), len(group), f"{table} ({label})")
        if vectors is None:
            vectors = np.zeros((len(texts), part.shape[1]), dtype=np.float32)
        vectors[positions.to_numpy()] = part
    return vectors


def embed_index(
    index: GraphIndex,
    embed: Callable[..., np.ndarray],
    keep_existing: bool = False,
    skip: Collection[str] = (),
    embedded: Mapping[str, np.ndarray | None] = {},
) -> GraphIndex:
    """Fill chunk ("text"), entity ("name: description") and report ("title: summary") embeddings,
    L2-normalized float32 in table order. `embed(texts, method=label)` embeds one labelled group
    (`embedding_label`). An empty table, and a table named in `skip`, keeps None. `keep_existing`: a
    table that has its embeddings keeps them (an index read from your own database). `embedded`: the
    vectors of tables embedded already (`embed_table`, by the build while model calls were in flight).
    """
    inputs = {
        "chunks": lambda: chunk_texts(index.chunks),
        "entities": lambda: entity_texts(index.entities),
        "community_reports": lambda: report_texts(index),
    }
    arrays: dict[str, Any] = {}  # GraphIndex embedding field -> its array, or None
    for table, texts_of in inputs.items():
        field = EMBEDDINGS[table][0]
        if keep_existing and getattr(index, field) is not None:
            continue
        if table in embedded:
            arrays[field] = embedded[table]
            continue
        arrays[field] = None if table in skip else embed_table(table, *texts_of(), embed)
    return dataclasses.replace(index, **arrays)
