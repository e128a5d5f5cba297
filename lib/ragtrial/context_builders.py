"""Context builders that mix kinds under token budgets: GraphRAG local search and LightRAG.

Both start from the question's nearest graph elements by embedding and return entities,
relations, (reports, claims) and chunks, each kind cut to its share of the budget, in the order
the original systems put them in the prompt. Token counts are cl100k counts of the item texts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain

import numpy as np
from pydantic import BaseModel, Field

from ragtrial.config import RetrievalSettings
from ragtrial.graph import normalize_name
from ragtrial.graph_retrieval import WORD, GraphRetrieverBase, row_indices
from ragtrial.index import GraphIndex
from ragtrial.phrases import stop_words
from ragtrial.prompts import load_prompt
from ragtrial.retrieval import ContextItem, Retrieval, RetrieverParts, embed_question, one_blas_thread, top_k
from ragtrial.tokens import count_tokens


def within_budget(items: Iterable[ContextItem], budget: int) -> list[ContextItem]:
    """The leading items whose texts fit in `budget` cl100k tokens (stops at the first that does not;
    `items` may be a generator, so items past the budget are never built).
    """
    kept, used = [], 0
    for item in items:
        used += count_tokens(item.text)
        if used > budget:
            break
        kept.append(item)
    return kept


def first_occurrences(values: Iterable[int]) -> Iterator[int]:
    """`values` without repeats, in order, lazily (`dict.fromkeys` would consume them all)."""
    seen: set[int] = set()
    for value in values:
        if value not in seen:
            seen.add(value)
            yield value


def tokens_by_kind(items: Sequence[ContextItem]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item.kind] = out.get(item.kind, 0) + count_tokens(item.text)
    return out


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
        self.reports = [
            ContextItem(
                kind="community_report",
                text=r.full_text or f"{r.title}\n{r.summary}",
                score=float(r.rating),
                retriever=self.name,
                chunk_ids=list(r.chunk_ids),
                entity_ids=list(r.entity_ids),
                community_ids=[r.community_id],
            )
            for r in reports.itertuples()
        ]
        self.claims_of: dict[int, list[ContextItem]] = {}
        for c in index.claims.itertuples():
            if c.subject_id in self.graph.row_of:
                subject = self.graph.row_of[c.subject_id]
                self.claims_of.setdefault(subject, []).append(
                    ContextItem(
                        kind="claim",
                        text=f"{self.graph.names[subject]} [{c.claim_type}, {c.status}]: {c.description}",
                        score=1.0,
                        retriever=self.name,
                        chunk_ids=list(c.chunk_ids),
                        entity_ids=[e for e in (c.subject_id, c.object_id) if isinstance(e, str) and e],
                    )
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
        reports = within_budget((self.reports[r] for r in ranked_reports), community_budget)
        local: list[ContextItem] = []
        for n in range(1, len(selected) + 1):  # grow the selection while its whole local context fits
            grown = [g.entity_item(e, sims[e], self.name) for e in selected[:n]]
            grown += within_budget(
                (
                    g.relation_item(r, g.weight[r], self.name, self.chunk_ids(g.rel_chunks, r))
                    for r in self.relations_for(selected[:n])
                ),
                local_budget,
            )
            grown += within_budget((c for e in selected[:n] for c in self.claims_of.get(e, [])), local_budget)
            if sum(tokens_by_kind(grown).values()) > local_budget:
                break
            local = grown
        units: dict[int, tuple[int, int]] = {}  # chunk row -> (entity order, -relations citing it)
        for order, e in enumerate(selected):
            cited = np.asarray(g.rel_chunks[g.incident([e])].sum(axis=0)).ravel()
            for c in row_indices(g.mentions, e):
                units.setdefault(int(c), (order, -int(cited[c])))
        rows = sorted(units, key=lambda c: units[c])
        chunks = within_budget((self.chunks.item(c, -units[c][1], self.name) for c in rows), text_budget)
        items = reports + local + chunks
        return Retrieval(
            items,
            notes={
                "entities": [g.names[e] for e in selected],
                "tokens": tokens_by_kind(items),
                "budgets": {"community": community_budget, "local": local_budget, "text_unit": text_budget},
            },
        )


# ---------------------------------------------------------------- LightRAG


class QuestionKeywords(BaseModel):
    high_level_keywords: list[str] = Field(max_length=6)
    low_level_keywords: list[str] = Field(max_length=6)


class LightRAGRetriever(GraphRetrieverBase):
    """LightRAG hybrid mode. Low-level keywords find the k nearest entities (with their relations,
    by degree then weight, and their chunks, by how many of the entity's neighbours share them);
    high-level keywords find the k nearest relations by embedding of "source target description"
    (with their endpoints and chunks). Local then global results are merged per kind, each kind cut
    to `lightrag_tokens_per_kind`. Keywords come from the model (prompt question_keywords) or,
    without one, low = the linked entity mentions and high = the other content words.

    Entity and relation vectors are kept dimension-major (`*_vectors_t`, dims x rows): one pass
    over the relation vectors is most of a query's cost, and OpenBLAS streams that layout about
    twice as fast (400k x 384 here: 27 ms against 51 ms for the row-major product). The cosines are
    the same float32 sums added in another order (at most 4e-7 apart on the latency benchmark's
    questions), so the k nearest are those of the row-major product unless the k-th and the next
    lie within that rounding of each other; which of such a near-tie won was never fixed anyway:
    it depends on the summation order of the BLAS kernel, which OpenBLAS picks by CPU.
    """

    name = "lightrag"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        super().__init__(index, parts, settings)
        if settings.lightrag_keywords == "llm" and parts.llm is None:
            raise ValueError("lightrag: lightrag_keywords 'llm' needs an llm")
        if index.entity_embeddings is None:
            raise ValueError("lightrag needs entity embeddings: embed the index first")
        g = self.graph
        self.entity_vectors_t = np.ascontiguousarray(index.entity_embeddings.T)
        texts = [
            f"{g.names[s]} {g.names[t]} {d}"
            for s, t, d in zip(g.src, g.tgt, index.relations["description"], strict=True)
        ]
        vectors = (
            parts.embedder.embed(texts, stage="retrieval_index", method=self.name)
            if texts
            else np.zeros((0, len(self.entity_vectors_t)), dtype=np.float32)
        )
        self.relation_vectors_t = np.ascontiguousarray(vectors.T)
        # Every relation in `by_rank` order, and each entity's relations as positions in it: a few
        # entities' relations in that order are then a sorted union, not a sort of all their hubs'.
        self.ranked_relations = g.by_rank(np.arange(len(g.rel_ids)))
        self.relation_positions = g.incidence[:, self.ranked_relations].tocsr().sorted_indices()
        self.chunk_mentions = g.mentions.T.tocsr()  # chunk x entity

    def keywords(self, question: str) -> tuple[list[str], list[str], dict]:
        if self.settings.lightrag_keywords == "llm":
            prompt = load_prompt("question_keywords")
            reply = self.parts.llm.structured(
                prompt.render(question=question),
                QuestionKeywords,
                stage="question_keywords",
                method=self.name,
                prompt=prompt,
                max_tokens=self.settings.keywords_max_tokens,
            )
            return reply.low_level_keywords, reply.high_level_keywords, {}
        links = self.linker.link(question)
        linked = {normalize_name(w) for x in links for w in WORD.findall(x.mention)}
        rest = [
            w
            for w in WORD.findall(question)
            if w.casefold() not in stop_words() and normalize_name(w) not in linked
        ]
        return [x.mention for x in links], rest, self.linker.notes(links)

    def relations_of(self, entities: Sequence[int]) -> np.ndarray:
        """`graph.by_rank(graph.incident(entities))`, from the precomputed positions."""
        rows = [row_indices(self.relation_positions, e) for e in entities]
        return self.ranked_relations[np.unique(np.concatenate(rows or [np.zeros(0, int)]))]

    def chunks_by_shared(self, entities: Sequence[int]) -> Iterator[int]:
        """Each entity's chunks, entity by entity, most shared with its neighbours first (then table
        order). Lazy: the budget usually fills before the second entity's are needed.
        """
        g = self.graph
        for e in entities:
            chunks = row_indices(g.mentions, e)
            neighbour = np.zeros(len(g.ids))
            neighbour[row_indices(g.adjacency, e)] = 1.0
            shared = (
                self.chunk_mentions[chunks] @ neighbour
            )  # mentions of e's neighbours in each of e's chunks
            yield from (int(c) for c in chunks[np.lexsort((chunks, -shared))])

    @one_blas_thread
    def retrieve(self, question: str, k: int) -> Retrieval:
        g, embedder = self.graph, self.parts.embedder
        low, high, notes = self.keywords(question)
        notes.update(low_level=low, high_level=high)
        if not low and not high:
            return self.fall_back(question, k, "no keywords", notes)
        entities: list[int] = []
        relations: list[Iterable[int]] = []
        chunk_rows: list[Iterable[int]] = []
        if low:
            sims = (
                embedder.embed([", ".join(low)], stage="retrieval", method=self.name)[0]
                @ self.entity_vectors_t
            )
            found = [int(e) for e in top_k(sims, k)]
            entities += found
            relations.append(int(r) for r in self.relations_of(found))
            chunk_rows.append(self.chunks_by_shared(found))
        if high and self.relation_vectors_t.shape[1]:
            sims = (
                embedder.embed([", ".join(high)], stage="retrieval", method=self.name)[0]
                @ self.relation_vectors_t
            )
            found = [int(r) for r in g.by_rank(top_k(sims, k))]
            relations.append(found)
            entities += [int(e) for r in found for e in (g.src[r], g.tgt[r])]
            chunk_rows.append(int(c) for r in found for c in row_indices(g.rel_chunks, r))
        budget = self.settings.lightrag_tokens_per_kind
        items = within_budget(
            (g.entity_item(e, g.degree[e], self.name) for e in first_occurrences(entities)), budget
        )
        items += within_budget(
            (
                g.relation_item(r, g.weight[r], self.name, self.chunk_ids(g.rel_chunks, r))
                for r in first_occurrences(chain.from_iterable(relations))
            ),
            budget,
        )
        items += within_budget(
            (self.chunks.item(c, 1.0, self.name) for c in first_occurrences(chain.from_iterable(chunk_rows))),
            budget,
        )
        return Retrieval(items, notes=notes)
