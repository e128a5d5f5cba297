"""The retriever names: one registry entry per retriever, resolved on use so that building a
vector retriever never imports llama-index.
"""

from __future__ import annotations

from typing import Any

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.config.store import StoreSettings
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.plan import QUESTION_TOKENS, StagePlan, frame_tokens, projected
from ragtrial.prompts import load_prompt
from ragtrial.registry import Registry
from ragtrial.retrieval.base import Retriever, RetrieverParts
from ragtrial.retrieval.entity_graph import select_graph

# Classes are named by dotted path and imported on use, so building a vector retriever never imports
# llama-index. `llm_setting`: the retrieval setting under which the retriever itself calls the model
# (set to "llm"); None: it never does. `reads_graph`: whether it ranks from the entity graph (a graph
# retriever) or from passages alone. `library`: whose code retrieves ("kit", or "llama-index").
RETRIEVERS: Registry[type] = Registry("retriever")
RETRIEVERS.add(
    "vector",
    "ragtrial.retrieval.passages:VectorRetriever",
    "NaiveRAG: cosine between question and chunk embeddings",
    llm_setting=None,
    reads_graph=False,
    library="kit",
)
RETRIEVERS.add(
    "bm25",
    "ragtrial.retrieval.passages:BM25Retriever",
    "BM25 Okapi over chunk tokens",
    llm_setting=None,
    reads_graph=False,
    library="kit",
)
RETRIEVERS.add(
    "ts_rank",
    "ragtrial.retrieval.passages:TsRankRetriever",
    "Postgres ts_rank (defaults) over chunk tokens",
    llm_setting=None,
    reads_graph=False,
    library="kit",
)
RETRIEVERS.add(
    "hybrid",
    "ragtrial.retrieval.passages:HybridRetriever",
    "vector + keyword (retrieval.keyword: BM25 or ts_rank) by reciprocal rank fusion",
    llm_setting=None,
    reads_graph=False,
    library="kit",
)
RETRIEVERS.add(
    "graph_walk",
    "ragtrial.retrieval.graph_walk:GraphWalkRetriever",
    "question entities, then a breadth-first walk",
    llm_setting="entity_source",
    reads_graph=True,
    library="kit",
)
RETRIEVERS.add(
    "graph_hybrid",
    "ragtrial.retrieval.graph_walk:GraphHybridRetriever",
    "graph walk + vector by reciprocal rank fusion",
    llm_setting="entity_source",
    reads_graph=True,
    library="kit",
)
RETRIEVERS.add(
    "local_search",
    "ragtrial.retrieval.local_search:LocalSearchRetriever",
    "GraphRAG local search (mixed context)",
    llm_setting=None,
    reads_graph=True,
    library="kit",
)
RETRIEVERS.add(
    "lightrag",
    "ragtrial.retrieval.lightrag:LightRAGRetriever",
    "LightRAG: low- and high-level keyword retrieval",
    llm_setting="lightrag_keywords",
    reads_graph=True,
    library="kit",
)
RETRIEVERS.add(
    "fastgraphrag",
    "ragtrial.retrieval.ppr:FastGraphRAGRetriever",
    "fast-graphrag: personalized PageRank from question entities",
    llm_setting="entity_source",
    reads_graph=True,
    library="kit",
)
RETRIEVERS.add(
    "hipporag",
    "ragtrial.retrieval.ppr:HippoRAGRetriever",
    "HippoRAG: personalized PageRank from question entities weighted by node specificity, passages by "
    "the ranks of the entities they mention",
    llm_setting="entity_source",
    reads_graph=True,
    library="kit",
)
RETRIEVERS.add(
    "kg_triplets",
    "ragtrial.retrieval.llamaindex_bridge:KGTripletRetriever",
    "KG-GraphRAG triplets through llama-index",
    llm_setting="entity_source",
    reads_graph=True,
    library="llama-index",
)
RETRIEVERS.add(
    "vector_llamaindex",
    "ragtrial.retrieval.llamaindex_bridge:LlamaIndexVectorRetriever",
    "NaiveRAG through llama-index",
    llm_setting=None,
    reads_graph=False,
    library="llama-index",
)


# The in-database twins of in-memory retrievers, by store (`store.retrieval`): each ranks as its twin
# does (tests/retrieval/test_stores_*.py pin it), with its search run by the store.
STORE_TWINS: dict[str, dict[str, tuple[str, str]]] = {
    "postgresql": {
        "vector": ("ragtrial.retrieval.stores.postgres:PostgresVectorRetriever", "vector search in SQL"),
        "bm25": ("ragtrial.retrieval.stores.postgres:PostgresBM25Retriever", "BM25 in SQL"),
        "ts_rank": ("ragtrial.retrieval.stores.postgres:PostgresTsRankRetriever", "Postgres' own ts_rank"),
        "hybrid": (
            "ragtrial.retrieval.stores.postgres:PostgresHybridRetriever",
            "vector, keyword and RRF in SQL",
        ),
        "graph_walk": (
            "ragtrial.retrieval.stores.postgres:PostgresGraphWalkRetriever",
            "the walk and hub cap by a recursive query",
        ),
        "graph_hybrid": (
            "ragtrial.retrieval.stores.postgres:PostgresGraphHybridRetriever",
            "the SQL walk and SQL hybrid fused",
        ),
    },
    "cypher": {
        "graph_walk": (
            "ragtrial.retrieval.stores.cypher:CypherGraphWalkRetriever",
            "the walk and hub cap by Cypher neighbourhood queries",
        ),
        "graph_hybrid": (
            "ragtrial.retrieval.stores.cypher:CypherGraphHybridRetriever",
            "the Cypher walk and the in-memory hybrid fused",
        ),
    },
}
for _store, _twins in STORE_TWINS.items():
    for _twin, (_target, _how) in _twins.items():
        RETRIEVERS.add(
            f"{_twin}_{_store}",
            _target,
            f"{_twin} in the {_store} store ({_how})",
            llm_setting=RETRIEVERS.entry(_twin).metadata["llm_setting"],
            reads_graph=RETRIEVERS.entry(_twin).metadata["reads_graph"],
            library=_store,
            twin=_twin,
        )


def store_retriever(name: str, store: StoreSettings) -> str:
    """The retriever that runs for `name` under `store.retrieval`: its in-database twin where it has one."""
    twins = STORE_TWINS.get(store.retrieval, {})
    return f"{name}_{store.retrieval}" if name in twins else name


def make_retriever(
    name: str, index: GraphIndex, ctx_or_parts: Any, settings: RetrievalSettings | None = None
) -> Retriever:
    """Build the retriever `name` over `index` (over its graph `retrieval.graph_origin` names), its
    in-database twin when `store.retrieval` names a store that has one. `ctx_or_parts` is a
    ModelContext (its embedder, llm, `settings.retrieval` and `settings.store` are used) or a
    `RetrieverParts`; `settings` overrides the run's.
    """
    if isinstance(ctx_or_parts, RetrieverParts):
        parts = ctx_or_parts
    else:
        parts = RetrieverParts(ctx_or_parts.embedder, ctx_or_parts.llm, ctx_or_parts.settings.store)
        settings = settings or ctx_or_parts.settings.retrieval
    settings = settings or RetrievalSettings()
    retriever_class = RETRIEVERS.get(store_retriever(name, parts.store))
    return retriever_class(select_graph(index, settings), parts, settings)


def planned_listing(
    retriever: str, settings: RetrievalSettings, n_questions: int, basis: str, method: str = ""
) -> list[StagePlan]:
    """The model calls `retriever` itself makes over `n_questions` questions, none sent: one listing
    of the question's entities (or LightRAG's keywords) per question when its `llm_setting` is "llm",
    else none.
    """
    setting = RETRIEVERS.entry(retriever).metadata.get("llm_setting") if retriever in RETRIEVERS else None
    if not setting or getattr(settings, setting) != "llm":
        return []
    listing = "question_keywords" if setting == "lightrag_keywords" else "question_entities"
    return [
        projected(
            listing,
            n_questions,
            n_questions * (frame_tokens(load_prompt(listing)) + QUESTION_TOKENS),
            settings.keywords_max_tokens if setting == "lightrag_keywords" else settings.entity_max_tokens,
            basis,
            "json",
            f"retrieval.{setting} = llm (one listing per question, shared through the cache)",
            method=method,
        )
    ]
