"""Settings the retrieval-and-answer methods share, and those of notebooks 04 (QA) and 05
(query-focused summarization).
"""

from __future__ import annotations

from pydantic import Field

from ragtrial.config.base import Section


class MethodSettings(Section):
    """What the retrieval-and-answer methods share (ragtrial.methods): one generator, one answer
    prompt and one context budget for every method; only the context differs. Retriever knobs (k,
    hops, hub cap, keyword search) are in `retrieval`.
    """

    methods: list[str] = [
        "closed_book",
        "naive_rag",
        "hybrid",
        "graph_walk",
        "graph_hybrid",
        "local_search",
        "global_search",
    ]
    baseline: str = "naive_rag"  # paired comparisons and complementarity are against this method
    questions_per_type: int | None = Field(None, ge=1)  # seeded sample per question type; None: all
    context_budget: int = Field(1000, gt=0)  # cl100k tokens of context shown (per part for integration)
    answer_prompt: str = "answer"
    answer_max_tokens: int = Field(48, gt=0)
    first_line_only: bool = True  # keep the first line of a short answer (base models run on)
    graph_method: str = "local_search"  # the GraphRAG side of selection and integration
    global_level: int = Field(
        0, ge=0
    )  # community level C<n> of global_search (the index reports C0 by default)
    map_budget: int = Field(1500, gt=0)  # report / chunk tokens per map call
    map_max_tokens: int = Field(128, gt=0)
    map_max_points: int = Field(2, ge=1)
    reduce_prompt: str = "answer"  # the shared answer prompt; "global_reduce" = GraphRAG's own reduce step
    seed: int = 0  # question sample and map-unit shuffle
    bootstrap_resamples: int = Field(2000, ge=100)


class QASettings(MethodSettings):
    """Notebook 04 (RAG vs GraphRAG on QA). Defaults fit the embedded model's 6-minute budget;
    paper settings are in params/paper_rag_vs_graphrag.yaml.
    """

    questions_per_type: int | None = Field(2, ge=1)


class SummarizationSettings(MethodSettings):
    """Notebook 05 (query-focused summarization, ROUGE-2 / BERTScore). Defaults fit a 3-minute budget."""

    methods: list[str] = ["naive_rag", "hybrid", "local_search", "global_search"]
    questions_per_type: int | None = Field(3, ge=1)
    answer_prompt: str = "summarize_query"
    answer_max_tokens: int = Field(96, gt=0)
    first_line_only: bool = False
    reduce_prompt: str = "summarize_query"
    bertscore_model: str | None = None  # a local model folder; None: the bundled all-MiniLM-L6-v2
    bertscore_layers: int | None = None  # None: the model's last layer
