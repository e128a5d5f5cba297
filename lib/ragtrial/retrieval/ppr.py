"""fast-graphrag's retrieval: personalized PageRank from the question's entities."""

from __future__ import annotations

from itertools import islice

import numpy as np
from scipy import sparse

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.index.tables import GraphIndex
from ragtrial.retrieval.base import Retrieval, RetrieverParts, top_k
from ragtrial.retrieval.entity_graph import GraphRetrieverBase, Link


class PersonalizedPageRank:
    """PageRank with restarts to a personalization vector, NetworkX's convention: `damping` is the
    probability of following an edge, a dangling node's mass restarts, edges are weighted. The
    transition matrix is built once; a query is a sparse power iteration that stops when the L1
    change falls below `tol` * n, as networkx.pagerank does.
    """

    def __init__(self, adjacency: sparse.csr_matrix):
        out = np.asarray(adjacency.sum(axis=1)).ravel()
        self.dangling = out == 0
        inverse = np.divide(1.0, out, out=np.zeros(len(out)), where=~self.dangling)
        self.walk = (sparse.diags(inverse) @ adjacency).T.tocsr()  # column-stochastic, as a CSR for matvec

    def __call__(
        self, personalization: np.ndarray, damping: float = 0.85, max_iter: int = 100, tol: float = 1e-6
    ) -> np.ndarray:
        restart = personalization / personalization.sum()
        rank = restart.copy()
        for _ in range(max_iter):
            new = damping * (self.walk @ rank + rank[self.dangling].sum() * restart) + (1 - damping) * restart
            if np.abs(new - rank).sum() < len(rank) * tol:
                return new
            rank = new
        return rank


# ---------------------------------------------------------------- fast-graphrag


class FastGraphRAGRetriever(GraphRetrieverBase):
    """fast-graphrag: linked entities seed a personalized PageRank over the weighted entity graph;
    relations score the sum of their endpoints' ranks and chunks the sum of their relations'
    scores. Returns the top k entities, relations and chunks (in that order).
    """

    name = "fastgraphrag"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        super().__init__(index, parts, settings)
        self.pagerank = PersonalizedPageRank(self.graph.adjacency)

    def from_seeds(self, question: str, links: list[Link], notes: dict, k: int) -> Retrieval:
        g, s = self.graph, self.settings
        seed = np.zeros(len(g.ids))
        for x in links:
            seed[x.entity] = max(seed[x.entity], x.similarity)
        rank = self.pagerank(seed, s.ppr_damping, s.ppr_max_iter, s.ppr_tol)
        rel_scores = rank[g.src] + rank[g.tgt]
        chunk_scores = np.asarray(g.rel_chunks.T @ rel_scores).ravel()
        items = [g.entity_item(e, rank[e], self.name) for e in top_k(rank, k, positive_only=True)]
        keep = self.time_filter(question)
        items += [
            g.relation_item(r, rel_scores[r], self.name, self.chunk_ids(g.rel_chunks, r))
            for r in islice(keep.relations(top_k(rel_scores, keep.depth(k), positive_only=True)), k)
        ]
        items += self.chunks.ranked(top_k(chunk_scores, k, positive_only=True), chunk_scores, self.name)
        return Retrieval(items, notes={**notes, **keep.notes()})


# ---------------------------------------------------------------- HippoRAG


class HippoRAGRetriever(GraphRetrieverBase):
    """HippoRAG's single-step retrieval: each linked question entity seeds a personalized PageRank
    over the entity graph with weight 1 / (passages mentioning it) (HippoRAG's node specificity);
    a passage scores the sum of the ranks of the entities it mentions. Returns the top k passages.
    Differs from HippoRAG where the kit has no model: question entities come from the kit's linker
    (names in the question, exact or by name embedding), not an LLM's named-entity list, and the
    graph has no synonymy edges (entities merge by normalized name). With `retrieval.time_filter`
    the PageRank walks only relations valid in the question's window, and `time_filtered` counts
    the out-of-window relations of the entities it reached.
    """

    name = "hipporag"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        super().__init__(index, parts, settings)
        self.pagerank = PersonalizedPageRank(self.graph.adjacency)
        passages = np.asarray(self.graph.mentions.sum(axis=1)).ravel()
        self.specificity = np.divide(1.0, passages, out=np.zeros(len(passages)), where=passages > 0)

    def from_seeds(self, question: str, links: list[Link], notes: dict, k: int) -> Retrieval:
        g, s = self.graph, self.settings
        seed = np.zeros(len(g.ids))
        for x in links:
            seed[x.entity] = self.specificity[x.entity]
        if not seed.any():
            return self.fall_back(question, k, "linked entities mention no passage", notes)
        keep = self.time_filter(question)
        filtered = keep.relation_mask() is not None
        pagerank = PersonalizedPageRank(self.walkable(keep)) if filtered else self.pagerank
        rank = pagerank(seed, s.hipporag_damping, s.ppr_max_iter, s.ppr_tol)
        if filtered:
            keep.count_relations(g.incident(np.flatnonzero(rank > 0)))
        chunk_scores = np.asarray(g.mentions.T @ rank).ravel()
        rows = top_k(chunk_scores, k, positive_only=True)
        return Retrieval(self.chunks.ranked(rows, chunk_scores, self.name), notes={**notes, **keep.notes()})
