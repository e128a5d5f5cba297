"""llama-index on the kit's index and model doors: an LLM and an embedding model that go through
`ctx.llm` / `ctx.embedder` (so every call is cached, ledgered and tagged), NaiveRAG as a llama-index
`VectorStoreIndex` over the kit's own chunks and embeddings, and LlamaIndex-style KG-GraphRAG
(Han et al. 2025: triplets, optionally with their source text) on a `SimplePropertyGraphStore`
filled from the kit's extracted graph — nothing is re-chunked, re-embedded or re-extracted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
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
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ragtrial.config import RetrievalSettings
from ragtrial.graph_retrieval import GraphRetrieverBase, Link
from ragtrial.index import GraphIndex
from ragtrial.llm import LLM
from ragtrial.retrieval import ChunkTable, ContextItem, Embeds, Retrieval, RetrieverParts

# ---------------------------------------------------------------- model doors


class KitLLM(CustomLLM):
    """A llama-index LLM whose completions are `ctx.llm.complete` calls with this object's stage,
    method and max_tokens. The kit does not stream: `stream_complete` yields the whole completion."""

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
        return LLMMetadata(context_window=self.context_window, num_output=self.max_tokens,
                           model_name=self._llm.model)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        done = self._llm.complete(prompt, stage=self.stage, method=self.method, max_tokens=self.max_tokens)
        return CompletionResponse(text=done.text, raw={"prompt_tokens": done.prompt_tokens,
                                                       "completion_tokens": done.completion_tokens,
                                                       "cached": done.cached})

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


def naive_rag_llamaindex(index: GraphIndex, embedder: Embeds, k: int) -> BaseRetriever:
    """A llama-index VectorStoreIndex over the kit's chunks, with the kit's chunk embeddings (no
    re-chunking, no re-embedding: nodes arrive with their vectors) and questions embedded by
    `embedder`; its retriever returns the top `k` chunks by cosine, as `vector` does."""
    if index.chunk_embeddings is None:
        raise ValueError("naive_rag_llamaindex needs chunk embeddings: embed the index first")
    nodes = [TextNode(id_=cid, text=text, embedding=vector.tolist())
             for cid, text, vector in zip(index.chunks["chunk_id"], index.chunks["text"], index.chunk_embeddings,
                                          strict=True)]
    store = VectorStoreIndex(nodes, embed_model=KitEmbedding(embedder, method="vector_llamaindex"))
    return store.as_retriever(similarity_top_k=k)


class LlamaIndexVectorRetriever:
    """`naive_rag_llamaindex` behind the kit's Retriever contract (llama-index scores every chunk
    in a Python loop: a cross-check of `vector`, not the fast path)."""

    name = "vector_llamaindex"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        self.chunks = ChunkTable(index)
        self.retriever = naive_rag_llamaindex(index, parts.embedder, settings.k)

    def retrieve(self, question: str, k: int) -> Retrieval:
        self.retriever.similarity_top_k = k
        found = self.retriever.retrieve(question)
        return Retrieval([self.chunks.item(self.chunks.row_of[n.node.node_id], n.score or 0.0, self.name)
                          for n in found])


# ---------------------------------------------------------------- KG-GraphRAG (triplets)


Key = tuple[str, str, str]  # (subject id, relation label, object id), as LabelledPropertyGraph keys triplets


class IndexedPropertyGraphStore(SimplePropertyGraphStore):
    """llama-index's in-memory property graph store, plus each node's triplets (built once) so that
    the lookups its retrievers make (`get(ids=...)`, `get_triplets(ids=...)` or `(entity_names=...)`,
    `get_rel_map`) touch the nodes' own triplets instead of rebuilding and scanning every triplet of
    the graph; results are the parent's (same triplets, in a fixed order). Read-only once built:
    upserts would bypass the per-node lists."""

    def __init__(self, graph: LabelledPropertyGraph):
        super().__init__(graph)
        self._by_node: dict[str, list[tuple[Key, Triplet]]] = {}
        for key in sorted(graph.triplets):
            s, r, o = key
            triplet = (graph.nodes[s], graph.relations[graph._get_relation_key(subj_id=s, obj_id=o, rel_id=r)],
                       graph.nodes[o])
            for end in dict.fromkeys((s, o)):
                self._by_node.setdefault(end, []).append((key, triplet))

    def _touching(self, names: Iterable[str]) -> dict[Key, Triplet]:
        found: dict[Key, Triplet] = {}
        for name in dict.fromkeys(names):
            found.update(self._by_node.get(name, ()))
        return found

    def get(self, properties: dict | None = None, ids: list[str] | None = None) -> list[LabelledNode]:
        if properties or not ids:
            return super().get(properties=properties, ids=ids)
        return [self.graph.nodes[i] for i in dict.fromkeys(ids) if i in self.graph.nodes]

    def get_triplets(self, entity_names: list[str] | None = None, relation_names: list[str] | None = None,
                     properties: dict | None = None, ids: list[str] | None = None) -> list[Triplet]:
        if relation_names or properties or (entity_names and ids):
            return super().get_triplets(entity_names, relation_names, properties, ids)
        return list(self._touching(entity_names or ids or []).values())

    def get_rel_map(self, graph_nodes: list[LabelledNode], depth: int = 2, limit: int | None = 30,
                    ignore_rels: list[str] | None = None) -> list[Triplet]:
        """The parent's traversal step for step (first hop: triplets touching the nodes; each later
        hop: triplets touching the previous hop's objects, minus those found at an earlier later hop;
        the parent never marks first-hop triplets as seen, so they can come back), comparing triplets
        by their (subject, relation, object) ids instead of by their rendered text."""
        found: list[Triplet] = []
        frontier = self._touching(n.id for n in graph_nodes)
        seen: set[Key] = set()
        for _ in range(depth):
            if not frontier:
                break
            found.extend(frontier.values())
            frontier = {key: t for key, t in self._touching(key[2] for key in frontier).items() if key not in seen}
            seen.update(frontier)
        ignored = set(ignore_rels or [])
        return [t for t in found if t[1].id not in ignored][:limit]


def property_graph_store(index: GraphIndex, node_names: Sequence[str]) -> IndexedPropertyGraphStore:
    """The kit's entities and relations as llama-index EntityNodes (named `node_names`) and Relations.
    A relation's label is the first line of its description (the extracted relation phrase) or
    "related to"; its properties carry the kit's relation id, weight and source chunk ids."""
    graph = LabelledPropertyGraph()
    node_of: dict[str, EntityNode] = {}
    for name, typ, eid in zip(node_names, index.entities["type"], index.entities["entity_id"], strict=True):
        node_of[eid] = EntityNode(name=name, label=typ or "entity", properties={"entity_id": eid})
        graph.add_node(node_of[eid])
    for rid, src, tgt, description, weight, chunks in index.relations[
            ["relation_id", "source_id", "target_id", "description", "weight", "chunk_ids"]].itertuples(index=False):
        graph.add_relation(Relation(label=description.splitlines()[0] if description.strip() else "related to",
                                    source_id=node_of[src].id, target_id=node_of[tgt].id,
                                    properties={"relation_id": rid, "weight": weight, "chunk_ids": list(chunks)}))
    return IndexedPropertyGraphStore(graph)


class SeedPathRetriever(BasePGRetriever):
    """llama-index's property-graph traversal (`get_rel_map`: triplets touching the seeds, then,
    hop by hop, triplets touching the previous hop's objects) from given seed nodes, deepened one
    hop at a time up to `path_depth` until `top_k` distinct triplets are reached (deeper ones could
    not outrank them). Triplets rank by the hop that first reached them (score 1 / (1 + hop)), then
    relation weight, then relation id; only the top_k become nodes, each carrying its relation's
    properties and its endpoints' entity ids as metadata. Whole hops are ranked, never a prefix of
    one: the store iterates a set, so "the first n triplets" would be an arbitrary subset."""

    def __init__(self, graph_store: SimplePropertyGraphStore, seeds: Sequence[str], path_depth: int, top_k: int):
        self._seeds, self._path_depth, self._top_k = list(seeds), path_depth, top_k
        self.hops_walked = 0
        super().__init__(graph_store=graph_store, include_text=False)

    def _get_nodes_with_score(self, triplets: list[Triplet], scores: list[float] | None = None) -> list[NodeWithScore]:
        nodes = super()._get_nodes_with_score(triplets, scores)
        for node, (head, relation, tail) in zip(nodes, triplets, strict=True):
            node.node.metadata.update(relation.properties,
                                      entity_ids=[head.properties["entity_id"], tail.properties["entity_id"]])
        return nodes

    def retrieve_from_graph(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        seeds = self._graph_store.get(ids=self._seeds)
        first_hop: dict[str, tuple[int, Triplet]] = {}  # relation id -> (hop first reached, triplet)
        reached = 0
        for depth in range(1, self._path_depth + 1):
            triplets = self._graph_store.get_rel_map(seeds, depth=depth, limit=None, ignore_rels=[KG_SOURCE_REL])
            for triplet in triplets[reached:]:  # each depth's result extends the previous one
                first_hop.setdefault(triplet[1].properties["relation_id"], (depth - 1, triplet))
            reached, self.hops_walked = len(triplets), depth
            if len(first_hop) >= self._top_k:
                break
        ranked = sorted(first_hop.values(), key=lambda ht: (ht[0], -ht[1][1].properties["weight"],
                                                             ht[1][1].properties["relation_id"]))[:self._top_k]
        return self._get_nodes_with_score([t for _, t in ranked], [1.0 / (1 + hop) for hop, _ in ranked])

    async def aretrieve_from_graph(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.retrieve_from_graph(query_bundle)


class KGTripletRetriever(GraphRetrieverBase):
    """LlamaIndex-style KG-GraphRAG: link the question's entities (the shared linker: model-listed
    or n-gram) and return the k triplets ("head -> relation -> tail") that llama-index's traversal
    (`SeedPathRetriever`, up to `hops` hops) ranks first. `kg_with_source_text` appends the chunks
    the returned triplets came from (at most k). No usable entity: vector fallback."""

    name = "kg_triplets"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        super().__init__(index, parts, settings)
        # Node ids are names; two entities with the same surface name (possible in imported graphs)
        # are told apart by their entity id.
        seen: dict[str, int] = {}
        for name in self.graph.names:
            seen[name] = seen.get(name, 0) + 1
        self.node_names = [n if seen[n] == 1 else f"{n} [{eid}]" for n, eid in zip(self.graph.names, self.graph.ids,
                                                                                 strict=True)]
        self.store = property_graph_store(index, self.node_names)
        node_id_of = {node.properties["entity_id"]: node.id for node in self.store.graph.nodes.values()}
        self.node_ids = [node_id_of[eid] for eid in self.graph.ids]

    def from_seeds(self, question: str, links: list[Link], notes: dict, k: int) -> Retrieval:
        paths = SeedPathRetriever(self.store, [self.node_ids[x.entity] for x in links], self.settings.hops, k)
        items = [ContextItem(kind="triplet", text=n.node.get_content(), score=float(n.score), retriever=self.name,
                             chunk_ids=list(n.node.metadata["chunk_ids"]), entity_ids=list(n.node.metadata["entity_ids"]),
                             relation_ids=[n.node.metadata["relation_id"]])
                 for n in paths.retrieve(question)]
        notes["hops_walked"] = paths.hops_walked
        if self.settings.kg_with_source_text:
            sources = list(dict.fromkeys(c for item in items for c in item.chunk_ids))[:k]
            items += [self.chunks.item(self.chunks.row_of[c], 0.0, self.name) for c in sources]
        return Retrieval(items, notes=notes)
