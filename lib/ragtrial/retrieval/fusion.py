"""Reciprocal rank fusion (Cormack, Clarke & Buettcher 2009): the hybrid retrievers' one way of
merging ranked lists.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.retrieval.base import ChunkTable, Retrieval, Retriever, join_origins, one_blas_thread


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


def fuse(name: str, retrievals: Sequence[Retrieval], chunks: ChunkTable, k: int, rrf_k: int) -> Retrieval:
    """RRF of ranked chunk lists; an item's score is its fused score. The parts' notes are kept
    (`fused`); a time window filtered parts applied (`time_window`, `time_filtered`: their sum) is
    lifted to the top, so a fused retrieval says what the window dropped as a single one does.
    """
    rankings = [[c for item in r.items if item.kind == "chunk" for c in item.chunk_ids] for r in retrievals]
    fused = reciprocal_rank_fusion(rankings, rrf_k)[:k]
    notes: dict = {"fused": [r.notes for r in retrievals]}
    filtered = [r.notes for r in retrievals if "time_filtered" in r.notes]
    if filtered:
        notes.update(
            time_window=filtered[0]["time_window"], time_filtered=sum(n["time_filtered"] for n in filtered)
        )
    return Retrieval(
        [chunks.item(chunks.row_of[c], s, name) for c, s in fused],
        fallback=join_fallbacks(r.fallback for r in retrievals),
        notes=notes,
    )


class FusedRetriever:
    """Ranked chunk lists of several retrievers merged by reciprocal rank fusion; each list
    contributes its top max(k, `rrf_depth`) chunks. Subclasses name the fused retrievers.
    """

    name = "fused"

    def __init__(self, parts: Sequence[Retriever], chunks: ChunkTable, settings: RetrievalSettings):
        self.parts = list(parts)
        self.chunks = chunks
        self.depth, self.rrf_k = settings.rrf_depth, settings.rrf_k
        # The graphs the fused parts retrieve from ("" when none is a graph retriever).
        self.graph_origin = join_origins(getattr(r, "graph_origin", "") for r in self.parts)

    @one_blas_thread
    def retrieve(self, question: str, k: int) -> Retrieval:
        lists = [r.retrieve(question, max(k, self.depth)) for r in self.parts]
        return fuse(self.name, lists, self.chunks, k, self.rrf_k)
