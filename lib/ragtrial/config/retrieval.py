"""Settings of the retrievers (`ragtrial.retrieval`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ragtrial.config.base import Section, conflict


class RetrievalSettings(Section):
    """The retrievers (ragtrial.retrieval) and their question -> entity linker, which the
    question-quality experiment (notebook 02) uses too. Defaults are LLM-free and sized for the
    embedded model's context; the papers' values are noted per key.
    """

    k: int = Field(5, ge=1, description="items asked of a retriever when the caller does not say")
    rrf_k: int = Field(60, ge=1, description="reciprocal rank fusion constant (Cormack et al. 2009)")
    rrf_depth: int = Field(20, ge=1, description="ranked candidates each fused list contributes")
    keyword: Literal["bm25", "ts_rank"] = Field(
        "bm25",
        description='the keyword half of hybrid: "bm25" (BM25 Okapi, bm25_k1 / bm25_b); "ts_rank" (Postgres '
        "ts_rank with its defaults, the Postgres graph-walk experiment's full-text ranking: term frequency "
        "with no idf, no saturation constant and no length normalization)",
    )
    bm25_k1: float = Field(1.5, ge=0, description="BM25 term-frequency saturation")
    bm25_b: float = Field(0.75, ge=0, le=1, description="BM25 document-length normalization")
    entity_source: Literal["string_embedding", "llm"] = Field(
        "string_embedding",
        description='how a question\'s entities are found: "string_embedding" links question n-grams to '
        'entity names (no model call); "llm" asks the model to list them (prompt question_entities), then '
        "links each name",
    )
    entity_max_tokens: int = Field(
        48, gt=0, description="reply token cap of the model's list of a question's entities"
    )
    link_threshold: float = Field(
        0.85, gt=0, le=1, description="name-embedding cosine needed to link a mention to an entity"
    )
    ngram_max: int = Field(4, ge=1, description="longest question n-gram, in words, linked to an entity name")
    graph_origin: Literal["both", "nlp", "llm", "import"] = Field(
        "both",
        description='which graph of the index the graph retrievers use: "nlp", "llm" or "import" keep only '
        'the entities (and their relations, communities, reports) of that origin; "both": every graph the '
        "index holds, side by side and not merged (in a graph_source both index the NLP and the LLM graph): "
        "each question mention is linked in each graph, so a walk starts in each and stays within it",
    )
    graph_fallback: Literal["vector", "none"] = Field(
        "vector",
        description="what a graph retriever returns when the question links no entity (or its seeds reach "
        'no context): "vector" the vector retrieval, "none" no context at all (the Postgres experiment\'s '
        "graph search; graph_hybrid then shows hybrid's list alone); either way the fallback is counted",
    )
    naive_rag_fills_budget: bool = Field(
        False,
        description="naive_rag shows chunks in rank order until the context budget is full (the GraphRAG "
        "paper's SS condition) instead of the top k",
    )
    hops: int = Field(2, ge=0, description="graph_walk / kg_triplets expansion from the question's entities")
    hub_degree_cap: int | None = Field(
        None, ge=1, description="never walk onward from an entity with more neighbours; None: no cap"
    )
    kg_with_source_text: bool = Field(False, description="kg_triplets: add the chunks the triplets came from")
    ppr_damping: float = Field(
        0.85, gt=0, lt=1, description="fastgraphrag's personalized PageRank: probability of following an edge"
    )
    hipporag_damping: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="hipporag's personalized PageRank: probability of following an edge (HippoRAG: 0.5)",
    )
    ppr_max_iter: int = Field(100, ge=1, description="personalized PageRank: iterations at most")
    ppr_tol: float = Field(1e-6, gt=0, description="personalized PageRank: convergence tolerance")
    local_max_tokens: int = Field(
        1000,
        gt=0,
        description="local_search (GraphRAG's LocalSearchMixedContext): context tokens (GraphRAG: 12,000)",
    )
    local_community_prop: float = Field(
        0.1, ge=0, le=1, description="local_search: share of the tokens for community reports (GraphRAG: 0.1)"
    )
    local_text_unit_prop: float = Field(
        0.5,
        ge=0,
        le=1,
        description="local_search: share of the tokens for source chunks (GraphRAG: 0.5); entities and "
        "relations get the rest",
    )
    local_top_k_relations: int = Field(
        10,
        ge=0,
        description="local_search: relations reaching beyond the selected entities, per selected entity "
        "(GraphRAG: 10)",
    )
    local_community_level: int = Field(
        2, ge=0, description="local_search: deepest community level whose reports are shown (GraphRAG: 2)"
    )
    lightrag_keywords: Literal["string_embedding", "llm"] = Field(
        "string_embedding",
        description='lightrag\'s low- and high-level keywords: "string_embedding" takes the linked entity '
        'mentions and the other words (no model call); "llm" asks the model (prompt question_keywords)',
    )
    lightrag_tokens_per_kind: int = Field(
        400,
        gt=0,
        description="lightrag: tokens per context kind (entities, relations, chunks); LightRAG's default is "
        "4,000 each",
    )
    keywords_max_tokens: int = Field(64, gt=0, description="reply token cap of lightrag's keyword call")
    time_filter: bool = Field(
        False,
        description='graph retrievers keep only what is valid in the question\'s time window ("in 2005", '
        '"before 2010", "between 2001 and 2005", ...; validity: the index\'s valid_from / valid_to, claims\' '
        "dates): fastgraphrag, local_search, lightrag and kg_triplets drop relation (and claim) items "
        "outside it; graph_walk, graph_hybrid's walk, their Cypher twins and hipporag walk only relations "
        "valid in it. "
        "Undated items and passages are never filtered; global_search and ts are not filtered (community "
        "reports summarise relations of every date); graph_walk_postgresql refuses the filter (no validity "
        'in its edge table). The number dropped is counted in the retrieval notes ("time_filtered")',
    )

    @model_validator(mode="after")
    def _proportions(self) -> RetrievalSettings:
        if self.local_community_prop + self.local_text_unit_prop > 1:
            raise conflict(
                "local_text_unit_prop", "local_community_prop + local_text_unit_prop must not exceed 1"
            )
        return self
