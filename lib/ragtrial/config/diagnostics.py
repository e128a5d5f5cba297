"""Settings of the retrieval diagnostics by question category (notebook 09, seed 004: FalkorDB's
evaluation methodology): the methods diagnosed, the seed's four metrics and their starting
thresholds, how passages map to graph elements, grounding, answer correctness by key facts, and the
regression check.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ragtrial.config.base import ExistingPath, conflict
from ragtrial.config.methods import (
    QA_METHODS,
    AnswerMaxTokens,
    AnswerPrompt,
    AnswerSettings,
    FirstLineOnly,
    MethodNames,
    QuestionsPerType,
    ReducePrompt,
)

# The seed's four question categories, in its order.
Category = Literal["single_hop", "multi_hop", "temporal", "contradictory"]
CATEGORIES: tuple[Category, ...] = ("single_hop", "multi_hop", "temporal", "contradictory")
Share = Annotated[float, Field(ge=0, le=1)]
LOG_CLUSTER_DISTANCE = 0.35  # cosine distance below which two logged questions are one kind of question


class DiagnosticsSettings(AnswerSettings):
    """Notebook 09 (ragtrial.evaluation.diagnostics): per method x question category, entity and
    relationship recall of what the context held, answer grounding, citation coverage, answer
    correctness by key facts, and the seed's failure attribution (retrieval in isolation, then
    gold-context injection through the oracle method). Defaults fit the embedded model's budget in the
    default batch; the seed's 200-500-question suite is params/paper_diagnostics.yaml.
    """

    methods: MethodNames = QA_METHODS
    questions_per_type: QuestionsPerType = 2
    question_types: list[str] | None = Field(
        list[str](CATEGORIES),  # data-set type names, which by default are the category names
        description="the data set's question types diagnosed (each maps to a category through `categories`); "
        "None: every type with answers",
    )
    categories: dict[str, Category] = Field(
        {c: c for c in CATEGORIES},
        description="data-set question type -> the seed's category (single_hop, multi_hop, temporal, "
        "contradictory), whose entity-recall threshold applies; a type not listed is reported under its own "
        "name with `default_entity_recall_threshold`",
    )
    answer_prompt: AnswerPrompt = "answer_cited"
    reduce_prompt: ReducePrompt = "answer_cited"
    answer_max_tokens: AnswerMaxTokens = 48
    first_line_only: FirstLineOnly = True
    entity_recall_thresholds: dict[str, Share] = Field(
        {"single_hop": 0.85, "multi_hop": 0.70, "temporal": 0.85, "contradictory": 0.70},
        description="the seed's starting entity-recall thresholds per category (calibrate on your data)",
    )
    default_entity_recall_threshold: Share = Field(
        0.70, description="entity-recall threshold of a question type that maps to no category"
    )
    relationship_recall_threshold: Share = Field(0.80, description="the seed's relationship-recall threshold")
    grounding_threshold: Share = Field(0.90, description="the seed's answer-grounding threshold")
    citation_threshold: Share = Field(0.95, description="the seed's citation-coverage threshold")
    passage_mapping: Literal["index_mentions", "name_match"] = Field(
        "index_mentions",
        description='how a shown passage maps to graph elements: "index_mentions", the entities and '
        'relations the index extracted from that chunk; "name_match", the gold entities whose name or alias '
        "occurs in the passage text (independent of extraction; relations then need both ends named in one "
        "passage)",
    )
    relationship_edges: Literal["shown", "induced"] = Field(
        "shown",
        description='which edges count as retrieved: "shown", the relations the context held whose two ends '
        'were also retrieved (the seed\'s guard against inflated recall); "induced", every index relation '
        "among the retrieved entities (the seed's Cypher query)",
    )
    grounding: Literal["entities", "model", "none"] = Field(
        "entities",
        description='answer grounding: "entities", LLM-free, the named entities and years of the answer '
        'checked against the retrieved context; "model", claims extracted from the answer, each checked '
        'against the context by the model with a rubric; "none": not measured (reported unavailable)',
    )
    correctness: Literal["judge", "contains"] = Field(
        "judge",
        description='answer correctness: "judge", a judge prompt checks the question\'s key facts '
        '(paraphrase-tolerant); "contains", a gold answer (normalized) is contained in the answer',
    )
    check_max_tokens: int = Field(96, gt=0, description="reply token cap of a key-fact or support check")
    grounding_claims_max_tokens: int = Field(
        120,
        gt=0,
        description='grounding "model": reply token cap of each answer\'s claim extraction (as '
        "claims.extraction_max_tokens, so an answer's extraction is shared with notebook 08's cache)",
    )
    grounding_max_claims: int | None = Field(
        6,
        ge=1,
        description='grounding "model": maxItems of the claim extraction reply (each claim is one support '
        "check); None: unbounded",
    )
    baseline_path: Annotated[str | None, ExistingPath("file")] = Field(
        None,
        description="regression mode: a stored diagnostics summary (ragtrial diagnose --save-baseline) "
        "that every metric is compared with; None: thresholds only",
    )
    tolerance: Share = Field(
        0.05, description="regression mode: how far a metric may fall below its baseline before it regresses"
    )
    log_sample_size: int | None = Field(
        None,
        ge=1,
        description="query_log data: questions sampled from the log's clusters in proportion to their "
        "frequency (ragtrial.questions.log_sampling.sample_log); None: every logged question",
    )
    log_cluster_distance: float = Field(
        LOG_CLUSTER_DISTANCE,
        gt=0,
        le=2,
        description="query_log data: the cosine distance below which logged questions join one cluster "
        "(average linkage)",
    )

    @model_validator(mode="after")
    def _thresholds_name_categories(self) -> DiagnosticsSettings:
        unknown = sorted(set(self.entity_recall_thresholds) - set(CATEGORIES))
        if unknown:
            raise conflict(
                "entity_recall_thresholds",
                f"unknown categories {', '.join(unknown)}; categories: {', '.join(CATEGORIES)}",
            )
        return self
