"""What every graph retriever shares: the entity graph as sparse matrices, question -> entity
linking (with or without a model call), and the seed-then-expand base class.

A question with no usable entity falls back to vector retrieval or to no context
(`retrieval.graph_fallback`) and says so in `Retrieval.fallback`; a failed model call (LLMError)
propagates to the caller, which records it against the question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, Field
from scipy import sparse

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.index.merge_extractions import normalize_name
from ragtrial.index.phrases import stop_words
from ragtrial.index.tables import GraphIndex, select_origin
from ragtrial.prompts import load_prompt
from ragtrial.retrieval.base import (
    ChunkTable,
    ContextItem,
    Retrieval,
    Retriever,
    RetrieverParts,
    join_origins,
    one_blas_thread,
)
from ragtrial.retrieval.passages import VectorRetriever
from ragtrial.retrieval.time_window import TimeFilter, bounds, date_year, overlaps, question_window

# ---------------------------------------------------------------- the graph as matrices


def _incidence(
    groups: Sequence[Sequence[str]], column_of: dict[str, int], n_columns: int, what: str
) -> sparse.csr_matrix:
    rows = [i for i, ids in enumerate(groups) for _ in ids]
    try:
        cols = [column_of[c] for ids in groups for c in ids]
    except KeyError as err:
        raise ValueError(f"{what} cite chunk {err} that is not in the chunks table") from None
    data = np.ones(len(rows))
    return sparse.csr_matrix((data, (rows, cols)), shape=(len(groups), n_columns))


class EntityGraph:
    """Entities, relations and their chunks as arrays in table order."""

    def __init__(self, index: GraphIndex, chunks: ChunkTable):
        ents, rels = index.entities, index.relations
        self.ids: list[str] = list(ents["entity_id"])
        self.names: list[str] = list(ents["name"])
        self.origins: list[str] = list(ents["origin"])
        self.row_of = {eid: i for i, eid in enumerate(self.ids)}
        self.texts = [f"{n}: {d}" if d else n for n, d in zip(self.names, ents["description"], strict=True)]
        unknown = set(rels["source_id"]).union(rels["target_id"]) - set(self.row_of)
        if unknown:
            raise ValueError(
                f"relations name entities missing from the entities table, e.g. {sorted(unknown)[0]!r}"
            )
        self.rel_ids: list[str] = list(rels["relation_id"])
        self.src = np.array([self.row_of[e] for e in rels["source_id"]], dtype=np.int64)
        self.tgt = np.array([self.row_of[e] for e in rels["target_id"]], dtype=np.int64)
        self.weight = rels["weight"].to_numpy(dtype=np.float64)
        self.validity = bounds(rels["valid_from"], rels["valid_to"])
        self.rel_texts = [
            f"{self.names[s]} -> {self.names[t]}: {d}"
            for s, t, d in zip(self.src, self.tgt, rels["description"], strict=True)
        ]
        n = len(self.ids)
        self.adjacency = self.adjacency_over(np.ones(len(self.rel_ids), dtype=bool))
        self.degree = np.diff(self.adjacency.indptr)  # distinct neighbours
        # GraphRAG's relationship rank ("combined degree") orders relations in local search and LightRAG.
        self.rel_rank = self.degree[self.src] + self.degree[self.tgt]
        self.mentions = _incidence(list(ents["chunk_ids"]), chunks.row_of, len(chunks.ids), "entities")
        self.rel_chunks = _incidence(list(rels["chunk_ids"]), chunks.row_of, len(chunks.ids), "relations")
        rows = np.arange(len(self.rel_ids))
        self.incidence = sparse.csr_matrix(
            (np.ones(2 * len(rows)), (np.concatenate([self.src, self.tgt]), np.concatenate([rows, rows]))),
            shape=(n, len(rows)),
        )  # entity x relation

    def adjacency_over(self, relations: np.ndarray) -> sparse.csr_matrix:
        """The symmetric weighted entity adjacency over the relations `relations` (a mask) selects:
        parallel and reversed relations add up, no self-loops. Over every relation it is `adjacency`;
        over those of a time window, the graph a filtered walk may take.
        """
        n = len(self.ids)
        src, tgt, weight = self.src[relations], self.tgt[relations], self.weight[relations]
        both = sparse.csr_matrix(
            (np.concatenate([weight, weight]), (np.concatenate([src, tgt]), np.concatenate([tgt, src]))),
            shape=(n, n),
        )  # duplicates (parallel/reversed relations) add up
        both.setdiag(0)
        both.eliminate_zeros()
        return both.tocsr()

    def incident(self, entities: Sequence[int] | np.ndarray) -> np.ndarray:
        """Relations touching any of `entities`, each once, in table order."""
        return np.unique(
            np.concatenate([row_indices(self.incidence, e) for e in entities] or [np.zeros(0, int)])
        )

    def by_rank(self, relations: np.ndarray) -> np.ndarray:
        """`relations` ordered by combined degree, then weight (both descending), then table order."""
        return relations[np.lexsort((relations, -self.weight[relations], -self.rel_rank[relations]))]

    def entity_item(self, e: int, score: float, retriever: str) -> ContextItem:
        return ContextItem(
            kind="entity",
            text=self.texts[e],
            score=float(score),
            retriever=retriever,
            chunk_ids=[],
            entity_ids=[self.ids[e]],
        )

    def relation_item(self, r: int, score: float, retriever: str, chunk_ids: list[str]) -> ContextItem:
        return ContextItem(
            kind="relation",
            text=self.rel_texts[r],
            score=float(score),
            retriever=retriever,
            chunk_ids=chunk_ids,
            entity_ids=[self.ids[self.src[r]], self.ids[self.tgt[r]]],
            relation_ids=[self.rel_ids[r]],
        )


def row_indices(matrix: sparse.csr_matrix, row: int) -> np.ndarray:
    """Column indices of the stored entries of one CSR row (neighbours, chunks cited)."""
    return matrix.indices[matrix.indptr[row] : matrix.indptr[row + 1]]


# ---------------------------------------------------------------- question -> entities


class QuestionEntities(BaseModel):
    entities: list[str] = Field(max_length=8)


@dataclass
class Link:
    mention: str
    entity: int
    similarity: float
    how: str  # exact | embedding


# A word of a question: letters/digits, with inner apostrophes ("Kay's").
WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def linked_origins(origins: Sequence[str], settings: RetrievalSettings) -> list[str]:
    """The graphs (entity origins, in table order of `origins`) that `retrieval.graph_origin` selects;
    an origin the index does not hold is a settings error, never an empty graph that silently falls back.
    """
    held = list(dict.fromkeys(origins))
    if settings.graph_origin == "both":
        return held
    if settings.graph_origin not in held:
        raise ValueError(
            f"retrieval.graph_origin is {settings.graph_origin!r}, but the index holds no such graph "
            f"(its graphs: {', '.join(held) or 'none'})"
        )
    return [settings.graph_origin]


def select_graph(index: GraphIndex, settings: RetrievalSettings) -> GraphIndex:
    """The index a retriever works on: the one graph `retrieval.graph_origin` names (chunks and
    documents all kept), or the whole index for "both".
    """
    origins = linked_origins(list(index.entities["origin"]), settings)
    return index if settings.graph_origin == "both" else select_origin(index, origins[0])


class NameTable:
    """The entity names of one graph: normalized name -> entity row (the first entity of a name) and
    the name embeddings, dimension-major.
    """

    def __init__(self, graph: EntityGraph, rows: np.ndarray, vectors: np.ndarray):
        self.rows = rows
        self.by_name: dict[str, int] = {}
        for row in rows:
            self.by_name.setdefault(normalize_name(graph.names[row]), int(row))
        # Dimension-major: OpenBLAS then skips transposing all the names for every question (~5 ms
        # of a query on 29k names). Same sums: bit for bit with this OpenBLAS for two or more
        # mentions; one mention goes through gemv, which adds them in another order.
        self.name_vectors_t = np.ascontiguousarray(vectors[rows].T)


class EntityLinker:
    """Question -> graph entities. Mentions come from the model (`entity_source="llm"`, prompt
    question_entities, asked once) or from the question's word n-grams (`"string_embedding"`, no model
    call). In each graph `retrieval.graph_origin` selects, a mention links to the entity whose
    normalized name equals it, else to the entity whose name embedding is nearest if the cosine
    reaches `link_threshold`. N-gram links are chosen exact first, then longest, then most similar,
    never overlapping within a graph and never twice the same entity; n-grams that start or end with a
    stop word are not candidates.
    """

    def __init__(self, graph: EntityGraph, parts: RetrieverParts, settings: RetrievalSettings, method: str):
        if settings.entity_source == "llm" and parts.llm is None:
            raise ValueError(f"{method}: entity_source 'llm' needs an llm")
        self.graph, self.parts, self.settings, self.method = graph, parts, settings, method
        self.origins = linked_origins(graph.origins, settings)
        vectors = (
            parts.embedder.embed(graph.names, stage="retrieval_index", method=method)
            if graph.names
            else np.zeros((0, 1), dtype=np.float32)
        )
        origin_of = np.array(graph.origins, dtype=object)
        self.tables = [NameTable(graph, np.flatnonzero(origin_of == o), vectors) for o in self.origins]

    def listed(self, question: str) -> list[str]:
        prompt = load_prompt("question_entities")
        assert self.parts.llm is not None  # __init__ requires it for entity_source "llm"
        reply = self.parts.llm.structured(
            prompt.render(question=question),
            QuestionEntities,
            stage="question_entities",
            method=self.method,
            prompt=prompt,
            max_tokens=self.settings.entity_max_tokens,
        )
        return [name for name in reply.entities if normalize_name(name)]

    @staticmethod
    def exact(table: NameTable, mention: str) -> Link | None:
        hit = table.by_name.get(normalize_name(mention))
        return None if hit is None else Link(mention, hit, 1.0, "exact")

    def nearest(self, table: NameTable, mentions: Sequence[str]) -> list[Link | None]:
        """Each mention's nearest entity name of `table` by embedding, if the cosine reaches the threshold."""
        if not mentions or not len(table.rows):
            return [None] * len(mentions)
        sims = (
            self.parts.embedder.embed(list(mentions), stage="retrieval", method=self.method)
            @ table.name_vectors_t
        )
        best = sims.argmax(axis=1)
        return [
            Link(m, int(table.rows[b]), float(row[b]), "embedding")
            if row[b] >= self.settings.link_threshold
            else None
            for m, b, row in zip(mentions, best, sims, strict=True)
        ]

    def link_each(self, names: Sequence[str]) -> list[Link | None]:
        """Each listed name's link, in the first selected graph that links it (the exact name, else
        the nearest by embedding); None for a name that links to no entity of any selected graph.
        """
        per_table = [self.link_in(table, names) for table in self.tables]
        return [
            next((x for x in links if x is not None), None) for links in zip(*per_table, strict=True)
        ] or [None] * len(names)

    def link(self, question: str) -> list[Link]:
        """The question's entities in every selected graph (graph by graph, in table order)."""
        if self.settings.entity_source == "llm":
            names = self.listed(question)
            return [x for table in self.tables for x in self.link_names(table, names)]
        return [x for table in self.tables for x in self.link_ngrams(table, question)]

    def link_in(self, table: NameTable, names: Sequence[str]) -> list[Link | None]:
        """Each name's link in `table`: the exact name, else the nearest by embedding, else None."""
        exact = [self.exact(table, n) for n in names]
        fuzzy = iter(self.nearest(table, [n for n, x in zip(names, exact, strict=True) if x is None]))
        return [x or next(fuzzy) for x in exact]

    def link_names(self, table: NameTable, names: list[str]) -> list[Link]:
        first_per_entity: dict[int, Link] = {}
        for found in self.link_in(table, names):
            if found is not None:
                first_per_entity.setdefault(found.entity, found)
        return list(first_per_entity.values())

    def link_ngrams(self, table: NameTable, question: str) -> list[Link]:
        words = list(WORD.finditer(question))
        stops = stop_words()
        spans = [
            (i, j)
            for i in range(len(words))
            for j in range(i + 1, min(i + self.settings.ngram_max, len(words)) + 1)
            if words[i][0].casefold() not in stops and words[j - 1][0].casefold() not in stops
        ]
        text_of = {span: question[words[span[0]].start() : words[span[1] - 1].end()] for span in spans}
        chosen: list[Link] = []
        taken: set[int] = set()

        def choose(candidates: list[tuple[tuple[int, int], Link]]) -> None:
            for (i, j), c in sorted(
                candidates, key=lambda sc: (-(sc[0][1] - sc[0][0]), -sc[1].similarity, sc[0][0])
            ):
                if taken.isdisjoint(range(i, j)) and all(c.entity != x.entity for x in chosen):
                    taken.update(range(i, j))
                    chosen.append(c)

        choose([(span, c) for span in spans if (c := self.exact(table, text_of[span])) is not None])
        # Only n-grams clear of the exact matches are embedded (an overlapping one could not be chosen).
        rest = [span for span in spans if taken.isdisjoint(range(*span))]
        choose(
            [
                (span, c)
                for span, c in zip(rest, self.nearest(table, [text_of[x] for x in rest]), strict=True)
                if c
            ]
        )
        return chosen

    def notes(self, links: Sequence[Link]) -> dict:
        return {
            "mentions": [x.mention for x in links],
            "seeds": [self.graph.names[x.entity] for x in links],
            "links": [x.how for x in links],
        }


class GraphRetrieverBase:
    """Shared construction: chunk table, entity graph, the vector fallback and (for retrievers that
    link question entities) the linker, whose name embeddings are computed here, not per query.
    `graph_origin` names the graph(s) retrieved from (e.g. "nlp+llm"); `make_retriever` has already
    cut the index down to the graph `retrieval.graph_origin` names.
    """

    name = ""
    links_entities = True

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        self.settings, self.parts = settings, parts
        vector = VectorRetriever(index, parts, settings)
        self.fallback: Retriever = vector  # the in-database retrievers fall back to their own vector search
        self.chunks = vector.chunks
        self.graph = EntityGraph(index, self.chunks)
        self.graph_origin = join_origins(linked_origins(self.graph.origins, settings))
        if self.links_entities:
            self.linker = EntityLinker(self.graph, parts, settings, self.name)
        self.window_adjacency: dict[tuple, sparse.csr_matrix] = {}  # `walkable`'s, per time window
        claims = index.claims
        self.claim_validity = bounds(map(date_year, claims["start_date"]), map(date_year, claims["end_date"]))

    def time_filter(self, question: str) -> TimeFilter:
        """This question's filter of relation and claim items (`retrieval.time_filter`): off, it keeps
        everything and notes nothing; on, it keeps what overlaps `question_window(question)`.
        """
        if not self.settings.time_filter:
            return TimeFilter(None, None, None)
        window = question_window(question)
        if window is None:
            return TimeFilter(None, np.ones(len(self.graph.rel_ids), dtype=bool), None)
        return TimeFilter(
            window, overlaps(*self.graph.validity, window), overlaps(*self.claim_validity, window)
        )

    def walkable(self, keep: TimeFilter) -> sparse.csr_matrix:
        """The entity adjacency a walk may take under `keep`: over the relations valid in its window
        (built once per window), the whole graph's when it filters nothing.
        """
        usable = keep.relation_mask()
        if usable is None:
            return self.graph.adjacency
        window = tuple(keep.window or ())
        if window not in self.window_adjacency:
            self.window_adjacency[window] = self.graph.adjacency_over(usable)
        return self.window_adjacency[window]

    @one_blas_thread
    def retrieve(self, question: str, k: int) -> Retrieval:
        """Link the question's entities and retrieve from them; a question with none falls back
        (`fall_back`), and the fallback is recorded.
        """
        links = self.linker.link(question)
        notes = self.linker.notes(links)
        if not links:
            return self.fall_back(question, k, "no usable entity", notes)
        return self.from_seeds(question, links, notes, k)

    def from_seeds(self, question: str, links: list[Link], notes: dict, k: int) -> Retrieval:
        raise NotImplementedError(f"{type(self).__name__} retrieves without seeds; it overrides retrieve")

    def fall_back(self, question: str, k: int, why: str, notes: dict) -> Retrieval:
        """What `retrieval.graph_fallback` says a graph retriever returns when the graph gives nothing:
        the vector retrieval, or no context; `Retrieval.fallback` says which and why.
        """
        if self.settings.graph_fallback == "none":
            return Retrieval([], fallback=f"{why} -> no context", notes=notes)
        found = self.fallback.retrieve(question, k)
        return Retrieval(found.items, fallback=f"{why} -> vector", notes=notes)

    def chunk_ids(self, matrix: sparse.csr_matrix, row: int) -> list[str]:
        return [self.chunks.ids[c] for c in row_indices(matrix, row)]
