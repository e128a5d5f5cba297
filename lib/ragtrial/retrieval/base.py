"""The retriever contract and what every retriever shares.

A retriever turns a question into ranked `ContextItem`s (the contract in docs/design.md).
Everything a query needs (matrices, BM25 weights, adjacency) is computed when a retriever is
built, so a query costs one question embedding plus a few sparse products.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from threadpoolctl import ThreadpoolController

from ragtrial.config.store import StoreSettings
from ragtrial.index.merge_extractions import normalize_name
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.client import LLM
from ragtrial.records import ordered_union
from ragtrial.text import occurs_as_words

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


def named_entities(text: str, candidates: Iterable[tuple[str, str]]) -> list[str]:
    """The ids of the (entity id, name) `candidates` whose name `text` names: the normalized name
    occurs in the normalized text as whole words. What a community report or a map point shows of
    its community's members (a report's text names some of them; membership alone is not shown).
    """
    shown = normalize_name(text)
    return list(dict.fromkeys(e for e, name in candidates if occurs_as_words(normalize_name(name), shown)))


def entity_names(index: GraphIndex) -> dict[str, str]:
    """Entity id -> name, what `point_provenance` and `report_item` trace names by."""
    return dict(zip(index.entities["entity_id"], index.entities["name"], strict=True))


def report_item(report: Any, names: Mapping[str, str], retriever: str) -> ContextItem:
    """A community report (a `community_reports` row) as context: its full text, and as entities the
    members its text names (a member the report never mentions is not shown by it).
    """
    text = report.full_text or f"{report.title}\n{report.summary}"
    return ContextItem(
        kind="community_report",
        text=text,
        score=float(report.rating),
        retriever=retriever,
        chunk_ids=list(report.chunk_ids),
        entity_ids=named_entities(text, ((e, names[e]) for e in report.entity_ids if e in names)),
        relation_ids=[],
        community_ids=[report.community_id],
    )


@dataclass
class Retrieval:
    """What a retriever returns for one question."""

    items: list[ContextItem]  # ranked, best first
    fallback: str = ""  # non-empty when the retriever fell back (e.g. "no usable entity -> vector")
    notes: dict[str, Any] = field(default_factory=dict)  # e.g. seeds found, hops walked

    @property
    def chunk_ids(self) -> list[str]:
        """Chunks the items cite, in rank order, each once (what retrieval recall is measured on)."""
        return ordered_union(item.chunk_ids for item in self.items)


def join_origins(origins: Iterable[str]) -> str:
    """Graph origins as one label, each once in order ("nlp", "nlp+llm"; "" for none)."""
    return "+".join(o for o in dict.fromkeys(origins) if o)


class Retriever(Protocol):
    name: str

    def retrieve(self, question: str, k: int) -> Retrieval: ...


class Embeds(Protocol):
    """What retrievers need of an embedder: `ragtrial.llm.Embedder` or `HashingEmbedder`."""

    def embed(self, texts: list[str], *, stage: str, method: str = "") -> np.ndarray: ...


@dataclass
class RetrieverParts:
    """The model doors a retriever may use (`llm` only for retrievers that call a model themselves),
    and the stores the in-database retrievers search (`ragtrial.retrieval.stores`).
    """

    embedder: Embeds
    llm: LLM | None = None
    store: StoreSettings = field(default_factory=StoreSettings)


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
