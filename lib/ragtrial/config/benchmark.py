"""Settings of the retrieval benchmark (notebook 13): LLM-free retrievers, and retrieval results other
systems published, scored against a benchmark's gold passages per question type.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ragtrial.config.base import Names, Section, conflict
from ragtrial.config.methods import QuestionsPerType, Resampling

RetrieverName = Annotated[str, Names("retriever")]
# The measures a comparison may lead with; "@k" ones take a k of `ks`.
LEAD_MEASURES = ("recall", "all_supporting", "mrr", "hits")


class ImportedRetrieval(Section):
    """How the benchmark reads one system's published retrieval results."""

    reads_graph: bool = Field(description="the system retrieves from a graph (false: a plain retriever)")
    group: str = Field(
        "imported",
        min_length=1,
        description="systems run under one setting (same questions, same corpus) share a group and are "
        'paired with each other only; the kit\'s retrievers are the group "kit"',
    )


class BenchmarkSettings(Resampling):
    """Notebook 13 (ragtrial.evaluation.retrieval_benchmark): every retriever ranks passages for every
    question without a model call; recall@k (HippoRAG's), the share of questions with every gold passage
    retrieved (fast-graphrag's "perfect retrieval"), MRR and Hits (MultiHop-RAG's) per retriever x question
    type, each graph retriever paired with the strongest plain one, and the graph's indexing bill.
    """

    retrievers: list[RetrieverName] = Field(
        ["bm25", "vector", "hybrid", "graph_walk", "graph_hybrid", "fastgraphrag", "hipporag"],
        min_length=1,
        description="the retrievers ranked (ragtrial.retrieval.registry.RETRIEVERS); graph retrievers run "
        "once per graph of `graphs` (named <retriever>:<graph>); none may call a model "
        "(retrieval.entity_source and retrieval.lightrag_keywords must be string_embedding)",
    )
    graphs: list[Literal["nlp", "import"]] = Field(
        ["nlp"],
        min_length=1,
        description='the graphs the graph retrievers read, each an index of its own: "nlp" the noun-phrase '
        'co-occurrence graph built here (no model call), "import" the published graph at index.import_path '
        "(e.g. HippoRAG's OpenIE file)",
    )
    depth: int = Field(10, ge=1, description="distinct passages each retriever returns per question")
    ks: list[Annotated[int, Field(ge=1)]] = Field(
        [2, 5, 10], min_length=1, description="the cut-offs of recall@k, all_supporting@k, mrr@k and hits@k"
    )
    question_types: list[str] | None = Field(
        None, description="the data set's question types benchmarked; None: every type with gold passages"
    )
    questions_per_type: QuestionsPerType = None
    lead_measure: str = Field(
        "recall@5",
        description="the measure of the paired comparisons and the verdict: recall@k, all_supporting@k, "
        "mrr@k or hits@k with k in `ks`, or all_supporting (every gold passage anywhere in the list)",
    )
    compare_with: str = Field(
        "strongest",
        description='what each retriever is paired with: "strongest", the plain (non-graph) retriever with '
        "the highest mean lead measure over all questions (chosen on the same questions, said in the "
        "report); or a retriever's name",
    )
    retrieval_files: dict[str, ImportedRetrieval] = Field(
        {},
        description="methods.answer_files holding other systems' retrieval results (retrieval: true), by "
        "their name there, scored beside the kit's retrievers",
    )
    seed: int = Field(0, ge=0, description="seed of the question sample and the bootstrap")

    @model_validator(mode="after")
    def _measures(self) -> BenchmarkSettings:
        if self.depth < max(self.ks):
            raise conflict("depth", f"must be at least the largest of ks ({max(self.ks)})")
        name, _, k = self.lead_measure.partition("@")
        if name not in LEAD_MEASURES or (k and (not k.isdigit() or int(k) not in self.ks)):
            raise conflict(
                "lead_measure",
                f"{self.lead_measure!r} is not one of {', '.join(LEAD_MEASURES)} with @k for k in ks "
                f"{self.ks} "
                "(all_supporting also without @k)",
            )
        if not k and name != "all_supporting":
            raise conflict("lead_measure", f"{name} needs a cut-off: {name}@k with k in ks {self.ks}")
        if self.compare_with != "strongest" and self.compare_with not in self.retrievers:
            raise conflict(
                "compare_with",
                f'"strongest" or one of the retrievers ({", ".join(self.retrievers)}), '
                f"got {self.compare_with!r}",
            )
        return self
