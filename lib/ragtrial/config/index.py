"""Settings of the graph index build (`ragtrial.index.build`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ragtrial.config.base import Section


class IndexSettings(Section):
    """The graph index (ragtrial.build). Defaults fit the embedded model's budget; the GraphRAG paper's
    values are in params/paper_index.yaml.
    """

    chunking: Literal["tokens", "documents"] = "tokens"  # "documents": one chunk per (pre-chunked) document
    chunk_size: int = Field(600, gt=0)  # GraphRAG paper: 600-token windows, 100 overlap
    chunk_overlap: int = Field(100, ge=0)
    # "both": the NLP and the LLM graph side by side in one index, kept apart by entity origin.
    graph_source: Literal["llm", "nlp", "both", "import"] = "both"
    import_path: str | None = None  # graph_source=import: a GraphRAG output folder or a HippoRAG OpenIE file
    # GraphRAG's NLP graph links noun phrases of one chunk; one sentence is far more precise.
    nlp_cooccurrence: Literal["chunk", "sentence"] = "sentence"
    entity_types: list[str] = ["person", "organization", "location", "event", "product"]
    llm_max_chunks: int | None = Field(12, ge=1)  # LLM-extract a seeded sample of this many chunks; None: all
    extraction_max_tokens: int = 256
    # Bounds in the JSON schema (maxItems / maxLength) so a reply ends before max_tokens; None: unbounded.
    max_items: int | None = Field(3, ge=1)
    text_max_chars: int | None = Field(48, ge=8)
    max_gleanings: int = Field(0, ge=0)
    claims: bool = False
    max_summaries: int | None = Field(8, ge=0)  # LLM description summaries (most-described elements first)
    summary_max_tokens: int = 80
    max_cluster_size: int = Field(10, ge=2)
    seed: int = 0xDEADBEEF  # Leiden and the chunk sample (GraphRAG's default Leiden seed)
    reports: Literal["llm", "none"] = "llm"
    report_context_tokens: int = Field(1200, gt=0)  # GraphRAG paper: 8k context window
    report_max_tokens: int = 256
    report_levels: list[int] | None = [0]  # None: every level
    report_min_size: int = Field(2, ge=1)
    max_reports: int | None = Field(1, ge=0)  # per graph origin, largest communities first; None: all
    store_path: str = "outputs/indexes"
