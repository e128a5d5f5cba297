"""Settings of question generation and the question-quality experiments (notebooks 02, 03)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ragtrial.config.base import Section


class RelevanceSettings(Section):
    """Question-retrieval relevance (notebook 03): one 0-5 rating per (question, retrieved context)."""

    retriever: str = "graph_walk"  # a ragtrial.retrieval name; "vector" for plain retrieval
    k: int = Field(5, ge=1)
    context_max_tokens: int = Field(600, gt=0)  # the rated context is clipped to this many tokens
    max_tokens: int = 24


class QuestionsSettings(Section):
    """Question generation and the question-quality experiments (notebooks 02, 03). Defaults fit the
    embedded model's budget; the paper's sizes are in params/paper_questions.yaml.
    """

    generators: list[Literal["summary", "persona", "graph", "ground_truth"]] = Field(
        ["summary", "persona", "graph", "ground_truth"], min_length=1
    )
    # The graph questions are sampled from and linked to: one origin of an index built with
    # index.graph_source=both (nlp covers every chunk; llm only a sample), or None for all of it.
    graph_origin: Literal["nlp", "llm", "import"] | None = "nlp"
    seed: int = 0
    temperature: float | None = 0.7  # generation samples (seeded per call); None: llm.temperature
    max_tokens: int = Field(120, gt=0)  # per generated question (a list call gets n times this)
    # summary-based (MGRAG / LightRAG): head + tail tokens of every document form the description
    head_tokens: int = Field(48, ge=0)
    tail_tokens: int = Field(48, ge=0)
    head_offset_tokens: int = Field(0, ge=0)  # LightRAG's Step_0 starts the head at token 1000
    description_max_tokens: int = Field(800, gt=0)
    summary_questions: int = Field(6, ge=0)  # paper: 150
    summary_per_call: int = Field(3, ge=1)
    # persona-based (GraphRAG Algorithm 1): K personas x N tasks x M questions
    corpus_description: str = ""  # optional human description put before the head/tail excerpts
    personas: int = Field(2, ge=1)
    tasks_per_persona: int = Field(1, ge=1)
    questions_per_task: int = Field(2, ge=1)
    # graph-text-grounded: per level, one question per sampled entity / relation / random walk
    levels: list[Literal["node", "edge", "subgraph"]] = ["node", "edge", "subgraph"]
    per_level: int = Field(4, ge=0)  # paper: 50
    min_hops: int = Field(50, ge=1)  # distinct edges a walk must cross (paper: 50)
    max_walk_steps: int = Field(1000, ge=1)
    max_walk_attempts: int = Field(20, ge=1)  # seeds tried before a subgraph is recorded as failed
    source_chunks: int = Field(2, ge=1)  # node/edge: source chunks shown with the structure
    chunk_tokens: int = Field(300, gt=0)  # each shown or summarized chunk is clipped to this
    summary_chunks: int = Field(3, ge=1)  # subgraph: chunks summarized (most cited by the walk first)
    summary_max_tokens: int = 80
    prompt_entities: int = Field(20, ge=1)
    prompt_relations: int = Field(20, ge=1)
    ground_truth_per_category: int = Field(2, ge=0)
    dedup_threshold: float = Field(0.95, gt=0, le=1)  # embedding cosine above which a question is a repeat
    # question entities: LLM extraction (optional) and the LLM-free n-gram linker (always)
    llm_entities: bool = True
    entity_max_tokens: int = 48
    link_threshold: float = Field(0.85, gt=0, le=1)  # name-embedding cosine needed to link
    ngram_max: int = Field(4, ge=1)
    community_level: int = Field(0, ge=0)  # communities reached are counted at this level
    relevance: RelevanceSettings = RelevanceSettings()
