"""The retriever names: one registry entry per retriever, resolved on use so that building a
vector retriever never imports llama-index.
"""

from __future__ import annotations

import importlib
from typing import Any

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.index.tables import GraphIndex
from ragtrial.retrieval.base import Retriever, RetrieverParts

# ---------------------------------------------------------------- registry

# name -> "module:Class"; resolved on use, so building a vector retriever never imports llama-index.
RETRIEVERS: dict[str, str] = {
    "vector": "ragtrial.retrieval:VectorRetriever",
    "bm25": "ragtrial.retrieval:BM25Retriever",
    "hybrid": "ragtrial.retrieval:HybridRetriever",
    "graph_walk": "ragtrial.graph_retrieval:GraphWalkRetriever",
    "graph_hybrid": "ragtrial.graph_retrieval:GraphHybridRetriever",
    "local_search": "ragtrial.context_builders:LocalSearchRetriever",
    "lightrag": "ragtrial.context_builders:LightRAGRetriever",
    "fastgraphrag": "ragtrial.graph_retrieval:FastGraphRAGRetriever",
    "kg_triplets": "ragtrial.llamaindex_bridge:KGTripletRetriever",
    "vector_llamaindex": "ragtrial.llamaindex_bridge:LlamaIndexVectorRetriever",
}


def make_retriever(
    name: str, index: GraphIndex, ctx_or_parts: Any, settings: RetrievalSettings | None = None
) -> Retriever:
    """Build the retriever `name` over `index`. `ctx_or_parts` is a ModelContext (its embedder, llm
    and `settings.retrieval` are used) or a `RetrieverParts`; `settings` overrides the run's.
    """
    if name not in RETRIEVERS:
        raise ValueError(f"unknown retriever {name!r}; known: {', '.join(RETRIEVERS)}")
    if isinstance(ctx_or_parts, RetrieverParts):
        parts = ctx_or_parts
    else:
        parts = RetrieverParts(embedder=ctx_or_parts.embedder, llm=ctx_or_parts.llm)
        settings = settings or ctx_or_parts.settings.retrieval
    module, cls = RETRIEVERS[name].split(":")
    return getattr(importlib.import_module(module), cls)(index, parts, settings or RetrievalSettings())
