"""Graph walk: from the question's entities, breadth-first over relations (hub cap), the chunks
the reached elements cite; and graph_hybrid, the walk fused with vector retrieval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.index.tables import GraphIndex
from ragtrial.retrieval.base import Retrieval, RetrieverParts, top_k
from ragtrial.retrieval.entity_graph import GraphRetrieverBase, Link
from ragtrial.retrieval.fusion import FusedRetriever
from ragtrial.retrieval.passages import HybridRetriever


def hop_distances(
    adjacency: sparse.csr_matrix,
    degree: np.ndarray,
    seeds: Sequence[int],
    hops: int,
    hub_degree_cap: int | None = None,
) -> np.ndarray:
    """Breadth-first hop count from the nearest seed (-1: not reached within `hops`). An entity with
    more than `hub_degree_cap` neighbours is reached but never walked through (seeds included).
    """
    n = adjacency.shape[0]
    dist = np.full(n, -1, dtype=np.int64)
    frontier = np.unique(np.asarray(seeds, dtype=np.int64))
    dist[frontier] = 0
    for hop in range(1, hops + 1):
        if hub_degree_cap is not None:
            frontier = frontier[degree[frontier] <= hub_degree_cap]
        walking = np.zeros(n)
        walking[frontier] = 1.0
        # One sparse product finds every neighbour of the frontier (the adjacency is symmetric).
        frontier = np.flatnonzero((adjacency @ walking > 0) & (dist < 0))
        if not len(frontier):
            break
        dist[frontier] = hop
    return dist


# ---------------------------------------------------------------- graph walk


class GraphWalkRetriever(GraphRetrieverBase):
    """The Postgres experiment's graph search: link the question's entities (seeds), walk relations
    outward `hops` hops (not onward from hubs above `hub_degree_cap`), score each chunk by the
    reached entities it mentions, each weighted 1 / (1 + hops from a seed), keep the top k.
    With `retrieval.time_filter` the walk takes only relations valid in the question's window (as
    the Cypher twin does), and `time_filtered` counts the out-of-window relations of the entities
    it walked from (those it would otherwise have taken).
    """

    name = "graph_walk"

    def from_seeds(self, question: str, links: list[Link], notes: dict, k: int) -> Retrieval:
        g, s = self.graph, self.settings
        keep = self.time_filter(question)
        seeds = [x.entity for x in links]
        dist = hop_distances(self.walkable(keep), g.degree, seeds, s.hops, s.hub_degree_cap)
        if keep.relation_mask() is not None:
            walked = (dist >= 0) & (dist < s.hops)
            if s.hub_degree_cap is not None:
                walked &= g.degree <= s.hub_degree_cap
            keep.count_relations(g.incident(np.flatnonzero(walked)))
        notes.update(keep.notes())
        weights = np.where(dist >= 0, 1.0 / (1.0 + np.maximum(dist, 0)), 0.0)
        scores = np.asarray(g.mentions.T @ weights).ravel()
        notes.update(
            reached=int((dist >= 0).sum()),
            max_hops=int(dist.max()),
            hubs_not_walked=0
            if s.hub_degree_cap is None
            else int(((dist >= 0) & (dist < s.hops) & (g.degree > s.hub_degree_cap)).sum()),
        )
        rows = top_k(scores, k, positive_only=True)
        if not len(rows):
            return self.fall_back(question, k, "seeds mention no chunk", notes)
        return Retrieval(self.chunks.ranked(rows, scores, self.name), notes=notes)


class GraphHybridRetriever(FusedRetriever):
    """Graph walk and hybrid ranked lists merged by reciprocal rank fusion (the two parts' classes are
    class attributes, which the in-database twins replace).
    """

    name = "graph_hybrid"
    walk_retriever: type[GraphWalkRetriever] = GraphWalkRetriever
    hybrid_retriever: type = HybridRetriever

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        walk = self.walk_retriever(index, parts, settings)
        super().__init__([walk, self.hybrid_retriever(index, parts, settings)], walk.chunks, settings)
