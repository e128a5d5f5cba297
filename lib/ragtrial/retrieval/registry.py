"""The retriever names: one registry entry per retriever, resolved on use so that building a
vector retriever never imports llama-index.
"""

from __future__ import annotations

from typing import Any

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.index.tables import GraphIndex
from ragtrial.registry import Registry
from ragtrial.retrieval.base import Retriever, RetrieverParts
from ragtrial.retrieval.entity_graph import select_graph

# Classes are named by dotted path and imported on use, so building a vector retriever never imports
# llama-index. `llm_setting`: the retrieval setting under which the retriever itself calls the model
# (set to "llm"); None: it never does. `library`: whose code retrieves ("kit", or "llama-index").
RETRIEVERS: Registry[type] = Registry("retriever")
RETRIEVERS.add(
    "vector",
    "ragtrial.retrieval.passages:VectorRetriever",
    "NaiveRAG: cosine between question and chunk embeddings",
    llm_setting=None,
    library="kit",
)
RETRIEVERS.add(
    "bm25",
    "ragtrial.retrieval.passages:BM25Retriever",
    "BM25 Okapi over chunk tokens",
    llm_setting=None,
    library="kit",
)
RETRIEVERS.add(
    "ts_rank",
    "ragtrial.retrieval.passages:TsRankRetriever",
    "Postgres ts_rank (defaults) over chunk tokens",
    llm_setting=None,
    library="kit",
)
RETRIEVERS.add(
    "hybrid",
    "ragtrial.retrieval.passages:HybridRetriever",
    "vector + keyword (retrieval.keyword: BM25 or ts_rank) by reciprocal rank fusion",
    llm_setting=None,
    library="kit",
)
RETRIEVERS.add(
    "graph_walk",
    "ragtrial.retrieval.graph_walk:GraphWalkRetriever",
    "question entities, then a breadth-first walk",
    llm_setting="entity_source",
    library="kit",
)
RETRIEVERS.add(
    "graph_hybrid",
    "ragtrial.retrieval.graph_walk:GraphHybridRetriever",
    "graph walk + vector by reciprocal rank fusion",
    llm_setting="entity_source",
    library="kit",
)
RETRIEVERS.add(
    "local_search",
    "ragtrial.retrieval.local_search:LocalSearchRetriever",
    "GraphRAG local search (mixed context)",
    llm_setting=None,
    library="kit",
)
RETRIEVERS.add(
    "lightrag",
    "ragtrial.retrieval.lightrag:LightRAGRetriever",
    "LightRAG: low- and high-level keyword retrieval",
    llm_setting="lightrag_keywords",
    library="kit",
)
RETRIEVERS.add(
    "fastgraphrag",
    "ragtrial.retrieval.ppr:FastGraphRAGRetriever",
    "fast-graphrag: personalized PageRank from question entities",
    llm_setting="entity_source",
    library="kit",
)
RETRIEVERS.add(
    "kg_triplets",
    "ragtrial.retrieval.llamaindex_bridge:KGTripletRetriever",
    "KG-GraphRAG triplets through llama-index",
    llm_setting="entity_source",
    library="llama-index",
)
RETRIEVERS.add(
    "vector_llamaindex",
    "ragtrial.retrieval.llamaindex_bridge:LlamaIndexVectorRetriever",
    "NaiveRAG through llama-index",
    llm_setting=None,
    library="llama-index",
)


def make_retriever(
    name: str, index: GraphIndex, ctx_or_parts: Any, settings: RetrievalSettings | None = None
) -> Retriever:
    """Build the retriever `name` over `index` (over its graph `retrieval.graph_origin` names).
    `ctx_or_parts` is a ModelContext (its embedder, llm and `settings.retrieval` are used) or a
    `RetrieverParts`; `settings` overrides the run's.
    """
    retriever_class = RETRIEVERS.get(name)
    if isinstance(ctx_or_parts, RetrieverParts):
        parts = ctx_or_parts
    else:
        parts = RetrieverParts(embedder=ctx_or_parts.embedder, llm=ctx_or_parts.llm)
        settings = settings or ctx_or_parts.settings.retrieval
    settings = settings or RetrievalSettings()
    return retriever_class(select_graph(index, settings), parts, settings)
