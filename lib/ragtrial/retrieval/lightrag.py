"""LightRAG's context builder: entities, relations and chunks from low- and high-level keywords,
each kind cut to its token share, in LightRAG's prompt order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain

import numpy as np
from pydantic import BaseModel, Field

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.index.merge_extractions import normalize_name
from ragtrial.index.phrases import stop_words
from ragtrial.index.tables import GraphIndex
from ragtrial.prompts import load_prompt
from ragtrial.retrieval.base import Retrieval, RetrieverParts, one_blas_thread, top_k
from ragtrial.retrieval.entity_graph import WORD, GraphRetrieverBase, row_indices
from ragtrial.retrieval.packing import first_occurrences, pack

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
            assert self.parts.llm is not None  # __init__ requires it for lightrag_keywords "llm"
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
        keep = self.time_filter(question)
        items = pack((g.entity_item(e, g.degree[e], self.name) for e in first_occurrences(entities)), budget)[
            0
        ]
        items += pack(
            (
                g.relation_item(r, g.weight[r], self.name, self.chunk_ids(g.rel_chunks, r))
                for r in keep.relations(first_occurrences(chain.from_iterable(relations)))
            ),
            budget,
        )[0]
        items += pack(
            (self.chunks.item(c, 1.0, self.name) for c in first_occurrences(chain.from_iterable(chunk_rows))),
            budget,
        )[0]
        return Retrieval(items, notes={**notes, **keep.notes()})
