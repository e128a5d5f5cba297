"""Settings of the retrievers (`ragtrial.retrieval`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ragtrial.config.base import Section


class RetrievalSettings(Section):
    """The retrievers (ragtrial.retrieval, ragtrial.graph_retrieval). Defaults are LLM-free and sized
    for the embedded model's context; the papers' values are noted per key.
    """

    k: int = Field(5, ge=1)  # items asked of a retriever when the caller does not say
    rrf_k: int = Field(60, ge=1)  # reciprocal rank fusion constant (Cormack et al. 2009)
    rrf_depth: int = Field(20, ge=1)  # ranked candidates each fused list contributes
    keyword: Literal["bm25"] = "bm25"  # the keyword half of hybrid
    bm25_k1: float = Field(1.5, ge=0)
    bm25_b: float = Field(0.75, ge=0, le=1)
    # Question entities: "string_embedding" links question n-grams to entity names (no model call);
    # "llm" asks the model to list them (prompt question_entities), then links each name.
    entity_source: Literal["string_embedding", "llm"] = "string_embedding"
    entity_max_tokens: int = Field(48, gt=0)
    link_threshold: float = Field(0.85, gt=0, le=1)  # name-embedding cosine needed to link a mention
    ngram_max: int = Field(4, ge=1)
    hops: int = Field(2, ge=0)  # graph_walk / kg_triplets expansion
    hub_degree_cap: int | None = Field(None, ge=1)  # never walk onward from an entity with more neighbours
    kg_with_source_text: bool = False  # kg_triplets: add the chunks the triplets came from
    ppr_damping: float = Field(0.85, gt=0, lt=1)  # fastgraphrag: probability of following an edge
    ppr_max_iter: int = Field(100, ge=1)
    ppr_tol: float = Field(1e-6, gt=0)
    # local_search (GraphRAG LocalSearchMixedContext); GraphRAG's defaults: 12,000 tokens, 0.1 / 0.5,
    # 10 relationships per entity, community level 2.
    local_max_tokens: int = Field(1000, gt=0)
    local_community_prop: float = Field(0.1, ge=0, le=1)
    local_text_unit_prop: float = Field(0.5, ge=0, le=1)
    local_top_k_relations: int = Field(10, ge=0)
    local_community_level: int = Field(2, ge=0)
    # lightrag: tokens per context kind (entities, relations, chunks); LightRAG's default is 4,000 each
    lightrag_keywords: Literal["string_embedding", "llm"] = "string_embedding"
    lightrag_tokens_per_kind: int = Field(400, gt=0)
    keywords_max_tokens: int = Field(64, gt=0)

    @model_validator(mode="after")
    def _proportions(self) -> RetrievalSettings:
        if self.local_community_prop + self.local_text_unit_prop > 1:
            raise ValueError("local_community_prop + local_text_unit_prop must not exceed 1")
        return self
