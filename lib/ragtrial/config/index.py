"""Settings of the graph index build (`ragtrial.index.build`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ragtrial.config.base import ExistingPath, Section, conflict


class IndexSettings(Section):
    """The graph index (ragtrial.index.build): chunks, the NLP and/or LLM graph, communities and their
    reports. Every key but `store_path` enters the index's config hash. Defaults fit the embedded
    model's budget; the GraphRAG paper's values are in params/paper_index.yaml.
    """

    chunking: Literal["tokens", "documents", "titled_documents"] = Field(
        "tokens",
        description='"tokens": windows of chunk_size tokens; "documents": one chunk per (pre-chunked) '
        'document; "titled_documents": one chunk per document, its title on the first line (a passage as '
        "HippoRAG indexes it: the title is often the entity a multi-hop question bridges through)",
    )
    chunk_size: int = Field(600, gt=0, description="tokens per chunk (GraphRAG paper: 600, with 100 overlap)")
    chunk_overlap: int = Field(
        100, ge=0, description="tokens a chunk shares with the one before it; less than chunk_size"
    )
    graph_source: Literal["llm", "nlp", "both", "import"] = Field(
        "both",
        description='"llm": extracted by the model; "nlp": noun-phrase co-occurrence, no model call; '
        '"both": the NLP and the LLM graph side by side in one index, kept apart by entity origin; '
        '"import": read from import_path',
    )
    import_path: Annotated[str | None, ExistingPath("file or folder", under="data")] = Field(
        None,
        description="graph_source import: a GraphRAG output folder or a HippoRAG OpenIE file, relative to "
        "the data root ($RAGTRIAL_DATA_ROOT, default data/) unless absolute; required then",
    )
    nlp_cooccurrence: Literal["chunk", "sentence"] = Field(
        "sentence",
        description="where two noun phrases must co-occur to be linked in the NLP graph: GraphRAG's NLP "
        "graph links those of one chunk; one sentence is far more precise",
    )
    entity_types: list[Annotated[str, Field(min_length=1)]] = Field(
        ["person", "organization", "location", "event", "product"],
        min_length=1,
        description="the entity types LLM extraction may assign",
    )
    llm_max_chunks: int | None = Field(
        12, ge=1, description="LLM-extract a seeded sample of this many chunks; None: all"
    )
    extraction_max_tokens: int = Field(
        256, gt=0, description="reply token cap of each extraction call (graph, gleaning and claims)"
    )
    max_items: int | None = Field(
        3,
        ge=1,
        description="maxItems of the extraction reply schema (entities, relations, claims), so a reply "
        "ends before max_tokens; None: unbounded",
    )
    text_max_chars: int | None = Field(
        48, ge=8, description="maxLength of each extracted description in the reply schema; None: unbounded"
    )
    max_gleanings: int = Field(
        0, ge=0, description="further extraction rounds per chunk asking for what was missed (GraphRAG)"
    )
    claims: bool = Field(False, description="also extract claims about the chunk's entities")
    max_summaries: int | None = Field(
        8,
        ge=0,
        description="LLM summaries of elements extracted with differing descriptions (most-described "
        "first); None: all",
    )
    summary_max_tokens: int = Field(80, gt=0, description="reply token cap of each description summary")
    relation_weight: Literal["strength", "occurrences"] = Field(
        "strength",
        description='weight of an LLM-extracted relation: "strength", the sum of the model\'s 1-10 strength '
        'over its instances (GraphRAG\'s code); "occurrences", the number of its instances (the GraphRAG '
        "paper's 3.1.3; the model is still asked for a strength, as GraphRAG's prompt does)",
    )
    max_cluster_size: int = Field(
        10, ge=2, description="hierarchical Leiden splits communities larger than this"
    )
    community_input: Literal["summed", "graphrag"] = Field(
        "summed",
        description='the graph Leiden clusters: "summed", every entity (isolated ones as singleton '
        'communities), parallel and reversed relations\' weights summed, self-loops ignored; "graphrag", '
        "GraphRAG 3.3's cluster_graph input (its communities exactly, on its own graph): the largest "
        "connected component only (of each origin's graph), a pair's last relation giving its weight, "
        "self-loops kept, edges in entity-name order",
    )
    seed: int = Field(
        0xDEADBEEF,
        ge=0,
        description="seed of Leiden and of the chunk sample (GraphRAG's default Leiden seed)",
    )
    embed_entities: bool = Field(
        True,
        description='embed each entity\'s "name: description" (local_search and lightrag rank entities by '
        "it); false: no entity embeddings, those two are unavailable (the retrieval benchmark's graphs: the "
        "other graph retrievers link question entities by name embeddings of their own)",
    )
    reports: Literal["llm", "none"] = Field(
        "llm", description='"llm": the model writes community reports; "none": no reports (no global search)'
    )
    report_context_tokens: int = Field(
        1200, gt=0, description="tokens of community content per report prompt (GraphRAG paper: 8k)"
    )
    report_max_tokens: int = Field(256, gt=0, description="reply token cap of each community report")
    report_levels: list[Annotated[int, Field(ge=0)]] | None = Field(
        [0], min_length=1, description="community levels that get reports; None: every level"
    )
    report_min_size: int = Field(2, ge=1, description="communities with fewer entities get no report")
    max_reports: int | None = Field(
        1, ge=0, description="reports per graph origin, largest communities first; None: all"
    )
    store_path: str = Field(
        "outputs/indexes", min_length=1, description="folder of saved indexes, one subfolder per config hash"
    )

    @model_validator(mode="after")
    def _consistent(self) -> IndexSettings:
        if self.chunk_overlap >= self.chunk_size:
            raise conflict("chunk_overlap", f"must be less than chunk_size ({self.chunk_size})")
        if self.graph_source == "import" and not self.import_path:
            raise conflict("import_path", "required when graph_source is import")
        return self
