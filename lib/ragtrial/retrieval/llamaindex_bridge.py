"""llama-index on the kit's index and model doors: an LLM and an embedding model that go through
`ctx.llm` / `ctx.embedder` (so every call is cached, ledgered and tagged), NaiveRAG as a llama-index
`VectorStoreIndex` over the kit's own chunks and embeddings, and LlamaIndex-style KG-GraphRAG
(Han et al. 2025: triplets, optionally with their source text) on a `SimplePropertyGraphStore`
filled from the kit's extracted graph — nothing is re-chunked, re-embedded or re-extracted.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from itertools import islice
from typing import Any, cast

from llama_index.core import VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import (
    KG_SOURCE_REL,
    EntityNode,
    LabelledNode,
    LabelledPropertyGraph,
    Relation,
    Triplet,
)
from llama_index.core.indices.property_graph.sub_retrievers.base import BasePGRetriever
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.retrievers import VectorIndexRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.client import LLM
from ragtrial.records import ordered_union
from ragtrial.retrieval.base import ChunkTable, ContextItem, Embeds, Retrieval, RetrieverParts
from ragtrial.retrieval.entity_graph import GraphRetrieverBase, Link

# ---------------------------------------------------------------- model doors


class KitLLM(CustomLLM):
    """A llama-index LLM whose completions are `ctx.llm.complete` calls with this object's stage,
    method and max_tokens. The kit does not stream: `stream_complete` yields the whole completion.
    """

    stage: str = "llamaindex"
    method: str = ""
    max_tokens: int = 256
    context_window: int = 8192
    _llm: LLM = PrivateAttr()

    def __init__(self, llm: LLM, **fields: Any):
        super().__init__(**fields)
        self._llm = llm

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self.context_window, num_output=self.max_tokens, model_name=self._llm.model
        )

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        done = self._llm.complete(prompt, stage=self.stage, method=self.method, max_tokens=self.max_tokens)
        return CompletionResponse(
            text=done.text,
            raw={
                "prompt_tokens": done.prompt_tokens,
                "completion_tokens": done.completion_tokens,
                "cached": done.cached,
            },
        )

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        whole = self.complete(prompt, formatted=formatted, **kwargs)
        yield CompletionResponse(text=whole.text, delta=whole.text, raw=whole.raw)


class KitEmbedding(BaseEmbedding):
    """llama-index embeddings computed by the kit's embedder (L2-normalized, cached per text)."""

    stage: str = "retrieval"
    method: str = ""
    _embedder: Embeds = PrivateAttr()

    def __init__(self, embedder: Embeds, **fields: Any):
        super().__init__(model_name=getattr(embedder, "model_name", type(embedder).__name__), **fields)
        self._embedder = embedder

    def _embed(self, texts: Sequence[str]) -> list[Embedding]:
        return self._embedder.embed(list(texts), stage=self.stage, method=self.method).tolist()

    def _get_query_embedding(self, query: str) -> Embedding:
        return self._embed([query])[0]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._embed([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self._embed(texts)


# ---------------------------------------------------------------- NaiveRAG through llama-index


def naive_rag_llamaindex(index: GraphIndex, embedder: Embeds, k: int) -> VectorIndexRetriever:
    """A llama-index VectorStoreIndex over the kit's chunks, with the kit's chunk embeddings (no
    re-chunking, no re-embedding: nodes arrive with their vectors) and questions embedded by
    `embedder`; its retriever returns the top `k` chunks by cosine, as `vector` does.
    """
    if index.chunk_embeddings is None:
        raise ValueError("naive_rag_llamaindex needs chunk embeddings: embed the index first")
    nodes = [
        TextNode(id_=cid, text=text, embedding=vector.tolist())
        for cid, text, vector in zip(
            index.chunks["chunk_id"], index.chunks["text"], index.chunk_embeddings, strict=True
        )
    ]
    store = VectorStoreIndex(nodes, embed_model=KitEmbedding(embedder, method="vector_llamaindex"))
    # typed BaseRetriever; a VectorStoreIndex makes a VectorIndexRetriever
    return cast(VectorIndexRetriever, store.as_retriever(similarity_top_k=k))


class LlamaIndexVectorRetriever:
    """`naive_rag_llamaindex` behind the kit's Retriever contract (llama-index scores every chunk
    in a Python loop: a cross-check of `vector`, not the fast path).
    """

    name = "vector_llamaindex"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        self.chunks = ChunkTable(index)
        self.retriever = naive_rag_llamaindex(index, parts.embedder, settings.k)

    def retrieve(self, question: str, k: int) -> Retrieval:
        self.retriever.similarity_top_k = k
        found = self.retriever.retrieve(question)
        return Retrieval(
            [self.chunks.item(self.chunks.row_of[n.node.node_id], n.score or 0.0, self.name) for n in found]
        )


# ---------------------------------------------------------------- KG-GraphRAG (triplets)


Key = tuple[str, str, str]  # (subject id, relation label, object id), as LabelledPropertyGraph keys triplets


def triplet_rank(triplet: Triplet) -> tuple[float, str]:
    """KG-GraphRAG's order among triplets reached at the same hop: heavier relation first, then relation id
    (unique, so the order is total).
    """
    return -triplet[1].properties["weight"], triplet[1].properties["relation_id"]


class IndexedPropertyGraphStore(SimplePropertyGraphStore):
    """llama-index's in-memory property graph store, plus each node's triplets (built once, in `rank`
    order) so that lookups (`get(ids=...)`, `get_triplets(ids=...)` or `(entity_names=...)`, and
    `touching` with a per-node cap) read the nodes' own triplets instead of rebuilding and scanning
    every triplet of the graph; results are the parent's (same triplets). Read-only once built:
    upserts would bypass the per-node lists.
    """

    def __init__(self, graph: LabelledPropertyGraph, rank: Callable[[Triplet], Any]):
        super().__init__(graph)
        self.rank = rank
        # Keyed as the graph keys its triplets: (subject id, relation id (its label), object id).
        triplets = [((s.id, r.id, o.id), (s, r, o)) for s, r, o in graph.get_triplets()]
        self._by_node: dict[str, list[tuple[Key, Triplet]]] = {}
        for key, triplet in sorted(triplets, key=lambda kt: rank(kt[1])):
            for end in dict.fromkeys((key[0], key[2])):
                self._by_node.setdefault(end, []).append((key, triplet))

    def touching(
        self, ids: Iterable[str], per_node: int | None = None, ignored: Collection[str] = ()
    ) -> dict[Key, Triplet]:
        """The triplets touching the nodes `ids`: of each node, in rank order, all of them or (with
        `per_node`) those up to its `per_node`-th whose relation label is not `ignored`.
        """
        found: dict[Key, Triplet] = {}
        for node_id in dict.fromkeys(ids):
            counted = 0
            for key, triplet in self._by_node.get(node_id, ()):
                if per_node is not None and counted == per_node:
                    break
                found[key] = triplet
                counted += triplet[1].id not in ignored
        return found

    def get(self, properties: dict | None = None, ids: list[str] | None = None) -> list[LabelledNode]:
        if properties or not ids:
            return super().get(properties=properties, ids=ids)
        return [self.graph.nodes[i] for i in dict.fromkeys(ids) if i in self.graph.nodes]

    def get_triplets(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> list[Triplet]:
        if relation_names or properties or (entity_names and ids):
            return super().get_triplets(entity_names, relation_names, properties, ids)
        return list(self.touching(entity_names or ids or []).values())


def property_graph_store(index: GraphIndex, node_names: Sequence[str]) -> IndexedPropertyGraphStore:
    """The kit's entities and relations as llama-index EntityNodes (named `node_names`) and Relations,
    each node's triplets in `triplet_rank` order. A relation's label is the first line of its
    description (the extracted relation phrase) or "related to"; its properties carry the kit's
    relation id, weight and source chunk ids.
    """
    graph = LabelledPropertyGraph()
    node_of: dict[str, EntityNode] = {}
    for name, typ, eid in zip(node_names, index.entities["type"], index.entities["entity_id"], strict=True):
        node_of[eid] = EntityNode(name=name, label=typ or "entity", properties={"entity_id": eid})
        graph.add_node(node_of[eid])
    for rid, src, tgt, description, weight, chunks in index.relations[
        ["relation_id", "source_id", "target_id", "description", "weight", "chunk_ids"]
    ].itertuples(index=False):
        graph.add_relation(
            Relation(
                label=description.splitlines()[0] if description.strip() else "related to",
                source_id=node_of[src].id,
                target_id=node_of[tgt].id,
                properties={"relation_id": rid, "weight": weight, "chunk_ids": list(chunks)},
            )
        )
    return IndexedPropertyGraphStore(graph, triplet_rank)


class SeedPathRetriever(BasePGRetriever):
    """llama-index's property-graph traversal (`get_rel_map`: triplets touching the seeds, then,
    hop by hop, triplets touching the previous hop's objects, minus those of earlier hops after the
    first) from given seed nodes, deepened one hop at a time up to `path_depth` until `top_k`
    distinct triplets are reached (deeper ones could not outrank them). Triplets rank by the hop
    that first reached them (score 1 / (1 + hop)), then by the store's rank (`triplet_rank`); only
    the top_k become nodes, each carrying its relation's properties and its endpoints' entity ids
    as metadata. Triplets labelled KG_SOURCE_REL are walked through but never returned, as
    `get_rel_map(ignore_rels=[KG_SOURCE_REL])` does.

    The result is that of ranking every triplet `get_rel_map` reaches, without reaching them all:
    of each node only its first `top_k` returnable triplets in rank order are read. One ranked
    below them cannot be returned: each of those `top_k` was either reached at an earlier hop or is
    new at this hop and ahead of it. And a node with that many gives at least the `top_k - reached`
    new triplets still wanted, so the walk ends at this hop: a hop's frontier is only built when
    nothing was cut.
    """

    def __init__(
        self, graph_store: IndexedPropertyGraphStore, seeds: Sequence[str], path_depth: int, top_k: int
    ):
        self._seeds, self._path_depth, self._top_k = list(seeds), path_depth, top_k
        self.hops_walked = 0
        super().__init__(graph_store=graph_store, include_text=False)

    def _get_nodes_with_score(
        self, triplets: list[Triplet], scores: list[float] | None = None
    ) -> list[NodeWithScore]:
        nodes = super()._get_nodes_with_score(triplets, scores)
        for node, (head, relation, tail) in zip(nodes, triplets, strict=True):
            node.node.metadata.update(
                relation.properties, entity_ids=[head.properties["entity_id"], tail.properties["entity_id"]]
            )
        return nodes

    def retrieve_from_graph(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # BasePGRetriever types its store PropertyGraphStore; __init__ takes only this kind
        store, ignored = cast(IndexedPropertyGraphStore, self._graph_store), {KG_SOURCE_REL}
        reached: dict[
            Key, tuple[int, Triplet]
        ] = {}  # returnable triplet -> (hop first reached, triplet), ranked
        seen: set[Key] = set()  # get_rel_map's: the triplets of every hop after the first
        frontier = [node.id for node in store.get(ids=self._seeds)]
        for hop in range(self._path_depth):
            self.hops_walked = hop + 1
            touching = store.touching(frontier, self._top_k, ignored)
            new = sorted(
                (key for key, t in touching.items() if key not in reached and t[1].id not in ignored),
                key=lambda key: store.rank(touching[key]),
            )
            missing = self._top_k - len(reached)
            reached.update((key, (hop, touching[key])) for key in new[:missing])
            if len(new) >= missing:
                break
            walked = [key for key in touching if key not in seen]  # nothing was cut: the whole hop
            if hop:
                seen.update(walked)
            frontier = [key[2] for key in walked]
        ranked = list(reached.values())
        return self._get_nodes_with_score([t for _, t in ranked], [1.0 / (1 + hop) for hop, _ in ranked])

    async def aretrieve_from_graph(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.retrieve_from_graph(query_bundle)


class KGTripletRetriever(GraphRetrieverBase):
    """LlamaIndex-style KG-GraphRAG: link the question's entities (the shared linker: model-listed
    or n-gram) and return the k triplets ("head -> relation -> tail") that llama-index's traversal
    (`SeedPathRetriever`, up to `hops` hops) ranks first. `kg_with_source_text` appends the chunks
    the returned triplets came from (at most k). No usable entity: vector fallback. With
    `retrieval.time_filter` the triplets whose relation lies outside the question's window are
    dropped from that ranking and counted (`time_filtered`); llama-index's traversal itself still
    walks through them to reach deeper triplets.
    """

    name = "kg_triplets"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        super().__init__(index, parts, settings)
        # Node ids are names; two entities with the same surface name (possible in imported graphs)
        # are told apart by their entity id.
        seen: dict[str, int] = {}
        for name in self.graph.names:
            seen[name] = seen.get(name, 0) + 1
        self.node_names = [
            n if seen[n] == 1 else f"{n} [{eid}]"
            for n, eid in zip(self.graph.names, self.graph.ids, strict=True)
        ]
        self.store = property_graph_store(index, self.node_names)
        node_id_of = {node.properties["entity_id"]: node.id for node in self.store.graph.nodes.values()}
        self.node_ids = [node_id_of[eid] for eid in self.graph.ids]
        self.rel_row = {rid: row for row, rid in enumerate(self.graph.rel_ids)}

    def from_seeds(self, question: str, links: list[Link], notes: dict, k: int) -> Retrieval:
        keep = self.time_filter(question)
        seeds = [self.node_ids[x.entity] for x in links]
        # Deep enough that k in-window triplets are among the ranked ones; the first k of a deeper
        # ranking are the k-deep ranking (SeedPathRetriever ranks by hop, then by the store's rank).
        paths = SeedPathRetriever(self.store, seeds, self.settings.hops, keep.depth(k))
        ranked = {self.rel_row[n.node.metadata["relation_id"]]: n for n in paths.retrieve(question)}
        items = [
            ContextItem(
                kind="triplet",
                text=n.node.get_content(),
                score=float(cast(float, n.score)),  # every triplet is scored by its hop
                retriever=self.name,
                chunk_ids=list(n.node.metadata["chunk_ids"]),
                entity_ids=list(n.node.metadata["entity_ids"]),
                relation_ids=[n.node.metadata["relation_id"]],
            )
            for n in (ranked[row] for row in islice(keep.relations(ranked), k))
        ]
        notes.update(hops_walked=paths.hops_walked, **keep.notes())
        if self.settings.kg_with_source_text:
            sources = ordered_union(item.chunk_ids for item in items)[:k]
            items += [self.chunks.item(self.chunks.row_of[c], 0.0, self.name) for c in sources]
        return Retrieval(items, notes=notes)
