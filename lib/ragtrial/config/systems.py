"""The upstream systems on trial (Microsoft GraphRAG, LightRAG, fast-graphrag): where their
environments live, how their indexes are made and the parameters of their searches. Defaults are
each system's own, except where a key says otherwise; `params/default.yaml` shrinks the context
budgets to the embedded model's 8k-token window.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ragtrial.config.base import ExistingPath, Section
from ragtrial.config.judge import UnbiasedJudgeSettings
from ragtrial.config.methods import MethodName, MethodNames


class GraphRAGSystemSettings(Section):
    """Microsoft GraphRAG 3.3.0 (methods graphrag_local, graphrag_global, graphrag_drift, graphrag_basic)."""

    output: Annotated[str | None, ExistingPath("folder", under="data")] = Field(
        None,
        description="a pre-built GraphRAG output folder (relative to the data root unless absolute); None: "
        "index.import_path when index.graph_source is import (the kit and GraphRAG then read one graph), "
        "else GraphRAG indexes the run's documents itself",
    )
    community_level: int | None = Field(
        None,
        ge=0,
        description="the community level local and global search read; None: methods.global_level, the "
        "level the kit's global search reads (GraphRAG's own default is 2)",
    )
    response_type: str = Field(
        "Multiple Paragraphs", min_length=1, description="GraphRAG's response_type of every search"
    )
    dynamic_community_selection: bool = Field(
        False, description="global search: let the model prune communities top-down (GraphRAG's option)"
    )
    max_context_tokens: int = Field(
        12000,
        gt=0,
        description="the context budget of every search: local, each global map batch and its reduce, "
        "DRIFT, basic (GraphRAG's default)",
    )
    chunk_size: int = Field(1200, gt=0, description="GraphRAG's own index build: text unit size in tokens")
    graphrag_settings: dict[str, Any] = Field(
        {},
        description="GraphRAG settings merged in last, as GraphRAG names them (e.g. "
        "{global_search: {map_max_length: 100}}, {drift_search: {n_depth: 1}})",
    )

    def index_options(self) -> dict[str, object]:
        return {"chunk_size": self.chunk_size, "graphrag": self.graphrag_settings}

    def query_options(self) -> dict[str, object]:
        return {
            "community_level": self.community_level,
            "response_type": self.response_type,
            "dynamic_community_selection": self.dynamic_community_selection,
            "max_context_tokens": self.max_context_tokens,
            "graphrag": self.graphrag_settings,
        }


class LightRAGSystemSettings(Section):
    """LightRAG (lightrag-hku 1.5.7; methods lightrag_hku_naive, _local, _global, _hybrid, _mix)."""

    graph: Literal["kit", "own"] = Field(
        "kit",
        description='"kit": insert the kit\'s own graph (retrieval.graph_origin) as a custom KG, so '
        'LightRAG and the kit\'s reimplementation read one graph; "own": LightRAG extracts its graph',
    )
    top_k: int = Field(
        40, gt=0, description="entities (local) / relations (global) retrieved (LightRAG's default)"
    )
    chunk_top_k: int = Field(20, gt=0, description="text chunks kept (LightRAG's default)")
    max_entity_tokens: int = Field(
        6000, gt=0, description="the entities' share of the context (LightRAG's default)"
    )
    max_relation_tokens: int = Field(
        8000, gt=0, description="the relations' share of the context (LightRAG's default)"
    )
    max_total_tokens: int = Field(30000, gt=0, description="the whole context budget (LightRAG's default)")
    response_type: str = Field("Multiple Paragraphs", min_length=1, description="LightRAG's response_type")

    def index_options(self) -> dict[str, object]:
        return {}

    def query_options(self) -> dict[str, object]:
        # no rerank model is configured: LightRAG's default True would only log a warning
        return {**self.model_dump(exclude={"graph"}), "enable_rerank": False}


class FastGraphRAGSystemSettings(Section):
    """fast-graphrag 0.0.5 (method fast_graphrag_ppr): it always extracts its own graph."""

    domain: str = Field(
        "Analyze the text and identify the people, places, organizations and events and how they relate.",
        min_length=1,
        description="fast-graphrag's domain prompt for its extraction",
    )
    entity_types: list[Annotated[str, Field(min_length=1)]] = Field(
        ["Person", "Place", "Organization", "Event"], min_length=1, description="entity types to extract"
    )
    example_queries: list[str] = Field(
        [], description="example queries that steer fast-graphrag's extraction"
    )

    def index_options(self) -> dict[str, object]:
        return self.model_dump()

    def query_options(self) -> dict[str, object]:
        return {}


class SystemsSettings(Section):
    """Where the upstream systems run and how long one request to a system may take."""

    install: Literal["lazy", "never"] = Field(
        "lazy",
        description='"lazy": an isolated system\'s environment is created on first use; "never": a missing '
        "one is an error naming `ragtrial systems install NAME`",
    )
    timeout_s: float = Field(
        3600.0, gt=0, description="seconds one index or query request to a system's worker may take"
    )
    graphrag: GraphRAGSystemSettings = Field(GraphRAGSystemSettings(), description="Microsoft GraphRAG")
    lightrag: LightRAGSystemSettings = Field(LightRAGSystemSettings(), description="LightRAG")
    fast_graphrag: FastGraphRAGSystemSettings = Field(
        FastGraphRAGSystemSettings(), description="fast-graphrag"
    )


# Each upstream mode beside the kit method that reimplements it.
UPSTREAM_PAIRS: list[tuple[str, str]] = [
    ("graphrag_local", "local_search"),
    ("graphrag_global", "global_search"),
    ("lightrag_hku_hybrid", "lightrag"),
]


class UpstreamComparisonSettings(UnbiasedJudgeSettings):
    """Notebook 11: each upstream system beside the kit's reimplementation of it, on the same
    questions: overlap of the retrieved context, answer agreement, the judge's verdict and cost.
    The unbiased judge's keys are notebook 07's (the same protocol code).
    """

    methods: MethodNames = [m for pair in UPSTREAM_PAIRS for m in pair]
    pairs: list[tuple[MethodName, MethodName]] = Field(
        UPSTREAM_PAIRS,
        description="(upstream method, kit method) pairs compared side by side and judged",
    )
    question_source: Literal["dataset", "graph"] = Field(
        "graph",
        description='"graph": graph-text-grounded questions over the index (a corpus without questions of '
        'its own); "dataset": the data set\'s own, by question_type',
    )
    trials: int = Field(2, ge=1, description="M: the whole evaluation re-run, every call a fresh sample")
