"""Settings of question generation and the question-quality experiments (notebooks 02, 03)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ragtrial.config.base import Names, Section, conflict


class RelevanceSettings(Section):
    """Question-retrieval relevance (notebook 03): one 0-5 rating per (question, retrieved context)."""

    retriever: Annotated[str, Names("retriever")] = Field(
        "graph_walk",
        description='the retriever rated: a ragtrial.retrieval name; "vector" for plain retrieval',
    )
    k: int = Field(5, ge=1, description="items retrieved per question")
    context_max_tokens: int = Field(600, gt=0, description="the rated context is clipped to this many tokens")
    max_tokens: int = Field(24, gt=0, description="reply token cap of each rating")


class QuestionsSettings(Section):
    """Question generation and the question-quality experiments (notebooks 02, 03): summary-based
    (MGRAG / LightRAG), persona-based (GraphRAG Algorithm 1), graph-text-grounded and the data set's
    own questions. Question entities are linked with the `retrieval` linker settings. Defaults fit
    the embedded model's budget; the paper's sizes are in params/paper_questions.yaml.
    """

    generators: list[Literal["summary", "persona", "graph", "ground_truth"]] = Field(
        ["summary", "persona", "graph", "ground_truth"], min_length=1, description="the generators run"
    )
    graph_origin: Literal["nlp", "llm", "import"] | None = Field(
        "nlp",
        description="the graph questions are sampled from and linked to: one origin of an index built with "
        "index.graph_source=both (nlp covers every chunk; llm only a sample), or None for all of it",
    )
    seed: int = Field(
        0, ge=0, description="seed of the samples of entities, relations, walks and data-set questions"
    )
    temperature: float | None = Field(
        0.7,
        ge=0,
        le=2,
        description="sampling temperature of generation (seeded per call); None: llm.temperature",
    )
    max_tokens: int = Field(
        120, gt=0, description="reply token cap per generated question (a list call gets n times this)"
    )
    question_max_chars: int | None = Field(
        140,
        ge=8,
        description="characters of each generated question, persona and task at most (the JSON schema's "
        "maxLength: a grammar-constrained reply then closes the string before max_tokens; a longer reply "
        "is a failure of kind too_long, a question at the cap is counted); None: no cap",
    )
    head_tokens: int = Field(
        48,
        ge=0,
        description="summary-based: tokens of each document's head in the data-set description",
    )
    tail_tokens: int = Field(
        48, ge=0, description="summary-based: tokens of each document's tail in the data-set description"
    )
    head_offset_tokens: int = Field(
        0, ge=0, description="summary-based: the token the head starts at (LightRAG's Step_0: 1000)"
    )
    description_max_tokens: int = Field(
        800, gt=0, description="summary-based: tokens of the data-set description at most"
    )
    summary_questions: int = Field(6, ge=0, description="summary-based: questions asked (paper: 150)")
    summary_per_call: int = Field(3, ge=1, description="summary-based: questions asked per model call")
    corpus_description: str | None = Field(
        None,
        description="persona-based: the high-level description of the corpus (and its use) the persona, "
        "task and question prompts see, as GraphRAG's Algorithm 1 takes it, never the corpus itself; None: "
        "the model writes one of at most corpus_description_words words from a sample of "
        "corpus_sample_tokens tokens (document heads and tails, head_tokens / tail_tokens)",
    )
    corpus_description_words: int = Field(
        80, ge=10, description="persona-based: words of the generated corpus description at most"
    )
    corpus_sample_tokens: int = Field(
        2000,
        gt=0,
        description="persona-based: tokens of the corpus sample the description is written from (only "
        "that call sees corpus text)",
    )
    personas: int = Field(2, ge=1, description="persona-based: K personas")
    tasks_per_persona: int = Field(1, ge=1, description="persona-based: N tasks per persona")
    questions_per_task: int = Field(2, ge=1, description="persona-based: M questions per (persona, task)")
    levels: list[Literal["node", "edge", "subgraph"]] = Field(
        ["node", "edge", "subgraph"],
        min_length=1,
        description="graph-text-grounded: the levels asked, one question per sampled entity / relation / "
        "random walk",
    )
    per_level: int = Field(4, ge=0, description="graph-text-grounded: questions per level (paper: 50)")
    min_hops: int = Field(50, ge=1, description="subgraph: distinct edges a walk must cross (paper: 50)")
    max_walk_steps: int = Field(
        1000, ge=1, description="subgraph: steps of one walk at most; at least min_hops"
    )
    max_walk_attempts: int = Field(
        20, ge=1, description="subgraph: seeds tried before a subgraph is recorded as failed"
    )
    source_chunks: int = Field(2, ge=1, description="node/edge: source chunks shown with the structure")
    chunk_tokens: int = Field(
        300, gt=0, description="each shown or summarized chunk is clipped to this many tokens"
    )
    summary_chunks: int = Field(
        3, ge=1, description="subgraph: chunks summarized (most cited by the walk's elements first)"
    )
    summary_max_tokens: int = Field(80, gt=0, description="subgraph: reply token cap of each chunk summary")
    prompt_entities: int = Field(20, ge=1, description="subgraph: the walk's entities shown at most")
    prompt_relations: int = Field(20, ge=1, description="subgraph: the walk's relations shown at most")
    ground_truth_per_category: int = Field(
        2, ge=0, description="ground_truth: the data set's questions taken per question type (seeded)"
    )
    dedup_threshold: float = Field(
        0.95, gt=0, le=1, description="embedding cosine above which a question is a repeat"
    )
    llm_entities: bool = Field(
        True,
        description="02: also have the model list each question's entities (beside the n-gram linker, "
        "which always runs)",
    )
    community_level: int = Field(0, ge=0, description="02: communities reached are counted at this level")
    relevance: RelevanceSettings = Field(
        RelevanceSettings(), description="question-retrieval relevance (notebook 03)"
    )

    @model_validator(mode="after")
    def _walks_can_succeed(self) -> QuestionsSettings:
        # A walk crosses at most one new edge per step: fewer steps than hops can never succeed.
        if self.max_walk_steps < self.min_hops:
            raise conflict("max_walk_steps", f"below min_hops ({self.min_hops}): no walk could succeed")
        return self
