"""GraphRAG local search (LocalSearchMixedContext): entities by embedding, then reports,
relations and text units, each cut to its proportion of the token budget, in GraphRAG's order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.index.tables import GraphIndex
from ragtrial.retrieval.base import (
    ContextItem,
    Retrieval,
    RetrieverParts,
    one_blas_thread,
    report_item,
    top_k,
)
from ragtrial.retrieval.entity_graph import GraphRetrieverBase, row_indices
from ragtrial.retrieval.packing import pack, tokens_by_kind
from ragtrial.retrieval.passages import embed_question

# ---------------------------------------------------------------- GraphRAG local search


class LocalSearchRetriever(GraphRetrieverBase):
    """GraphRAG local search context (LocalSearchMixedContext): the k entities nearest the question
    by embedding; the reports of their communities (deepest level <= `local_community_level`, most
    selected entities first) in `community_prop` of the budget; entities with their relations
    (in-network first, then out-network by links to the selection, at most `local_top_k_relations`
    per entity) and claims, grown entity by entity while they fit the local share; their chunks
    (by entity order, then by relations citing the chunk) in `text_unit_prop`. Items come in
    GraphRAG's context order: reports, entities, relations, claims, chunks.
    """

    name = "local_search"
    links_entities = False

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        super().__init__(index, parts, settings)
        if index.entity_embeddings is None:
            raise ValueError("local_search needs entity embeddings: embed the index first")
        self.entity_vectors = index.entity_embeddings
        self.report_of: dict[int, int] = {}  # entity row -> report row, deepest allowed level wins
        reports = index.community_reports.reset_index(drop=True)
        for row in reports.sort_values("level", kind="stable").itertuples():
            if row.level <= settings.local_community_level:
                self.report_of.update(
                    {self.graph.row_of[e]: row.Index for e in row.entity_ids if e in self.graph.row_of}
                )
        names = dict(zip(self.graph.ids, self.graph.names, strict=True))
        self.reports = [report_item(r, names, self.name) for r in reports.itertuples()]
        self.claims_of: dict[int, list[int]] = {}  # entity row -> its claims' rows in claim_items
        self.claim_items: dict[int, ContextItem] = {}
        for row, c in enumerate(index.claims.itertuples()):
            if c.subject_id in self.graph.row_of:
                subject = self.graph.row_of[c.subject_id]
                self.claims_of.setdefault(subject, []).append(row)
                self.claim_items[row] = ContextItem(
                    kind="claim",
                    text=f"{self.graph.names[subject]} [{c.claim_type}, {c.status}]: {c.description}",
                    score=1.0,
                    retriever=self.name,
                    chunk_ids=list(c.chunk_ids),
                    entity_ids=[e for e in (c.subject_id, c.object_id) if isinstance(e, str) and e],
                )

    def relations_for(self, selected: Sequence[int]) -> list[int]:
        """GraphRAG's relationship filter: relations among the selected entities by rank, then those
        leaving the selection, ordered by how many selected entities their outside end links to, then
        rank; at most `local_top_k_relations` outside relations per selected entity.
        """
        g, chosen = self.graph, np.asarray(selected)
        touching = g.incident(selected)
        src_in, tgt_in = np.isin(g.src[touching], chosen), np.isin(g.tgt[touching], chosen)
        inside = g.by_rank(touching[src_in & tgt_in])
        outside = touching[~(src_in & tgt_in)]
        external = np.where(src_in[~(src_in & tgt_in)], g.tgt[outside], g.src[outside])
        internal = g.src[outside] + g.tgt[outside] - external
        pairs = np.unique(np.stack([external, internal]), axis=1)
        ends, links = np.unique(pairs[0], return_counts=True)
        link_count = links[np.searchsorted(ends, external)] if len(ends) else np.zeros(0, int)
        order = np.lexsort((outside, -g.weight[outside], -g.rel_rank[outside], -link_count))
        return [int(r) for r in inside] + [
            int(r) for r in outside[order][: self.settings.local_top_k_relations * len(selected)]
        ]

    @one_blas_thread
    def retrieve(self, question: str, k: int) -> Retrieval:
        g, s = self.graph, self.settings
        sims = self.entity_vectors @ embed_question(self.parts.embedder, question, self.name)
        selected = [int(e) for e in top_k(sims, k)]
        community_budget = int(s.local_max_tokens * s.local_community_prop)
        text_budget = int(s.local_max_tokens * s.local_text_unit_prop)
        local_budget = s.local_max_tokens - community_budget - text_budget
        matches: dict[int, int] = {}
        for e in selected:
            if e in self.report_of:
                matches[self.report_of[e]] = matches.get(self.report_of[e], 0) + 1
        ranked_reports = sorted(matches, key=lambda r: (-matches[r], -self.reports[r].score))
        reports = pack((self.reports[r] for r in ranked_reports), community_budget)[0]
        local: list[ContextItem] = []
        keep = self.time_filter(question)
        for n in range(1, len(selected) + 1):  # grow the selection while its whole local context fits
            grown = [g.entity_item(e, sims[e], self.name) for e in selected[:n]]
            grown += pack(
                (
                    g.relation_item(r, g.weight[r], self.name, self.chunk_ids(g.rel_chunks, r))
                    for r in keep.relations(self.relations_for(selected[:n]))
                ),
                local_budget,
            )[0]
            grown += pack(
                (self.claim_items[c] for e in selected[:n] for c in keep.claims(self.claims_of.get(e, []))),
                local_budget,
            )[0]
            if sum(tokens_by_kind(grown).values()) > local_budget:
                break
            local = grown
        units: dict[int, tuple[int, int]] = {}  # chunk row -> (entity order, -relations citing it)
        for order, e in enumerate(selected):
            cited = np.asarray(g.rel_chunks[g.incident([e])].sum(axis=0)).ravel()
            for c in row_indices(g.mentions, e):
                units.setdefault(int(c), (order, -int(cited[c])))
        rows = sorted(units, key=lambda c: units[c])
        chunks = pack((self.chunks.item(c, -units[c][1], self.name) for c in rows), text_budget)[0]
        items = reports + local + chunks
        return Retrieval(
            items,
            notes={
                "entities": [g.names[e] for e in selected],
                "tokens": tokens_by_kind(items),
                "budgets": {"community": community_budget, "local": local_budget, "text_unit": text_budget},
                **keep.notes(),
            },
        )
