"""The root `Settings` of a run: one section per concern, and its validation with errors that
name the source and the dotted key.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from ragtrial.config.base import Section, params_error
from ragtrial.config.claims import ClaimsSettings
from ragtrial.config.data import DataSettings
from ragtrial.config.index import IndexSettings
from ragtrial.config.judge import JudgeSettings
from ragtrial.config.llm import BackendCheckSettings, EmbeddingSettings, LLMSettings
from ragtrial.config.methods import MethodSettings, QASettings, SummarizationSettings
from ragtrial.config.questions import QuestionsSettings
from ragtrial.config.retrieval import RetrievalSettings


class Settings(Section):
    """Everything a run is configured by, one section per concern, in the order of the flow."""

    llm: LLMSettings = Field(LLMSettings(), description="the model every call goes to")
    embeddings: EmbeddingSettings = Field(EmbeddingSettings(), description="the embedding model")
    backend_check: BackendCheckSettings = Field(
        BackendCheckSettings(), description="the probes of notebook 00"
    )
    data: DataSettings = Field(DataSettings(), description="the data set")
    index: IndexSettings = Field(IndexSettings(), description="the graph index build (notebook 01)")
    retrieval: RetrievalSettings = Field(
        RetrievalSettings(), description="the retrievers and their question -> entity linker"
    )
    methods: MethodSettings = Field(
        MethodSettings(), description="how the retrieval-and-answer methods are built, in every experiment"
    )
    questions: QuestionsSettings = Field(
        QuestionsSettings(), description="question generation and the question-quality experiments (02, 03)"
    )
    qa: QASettings = Field(QASettings(), description="RAG vs GraphRAG on QA (notebook 04)")
    summarization: SummarizationSettings = Field(
        SummarizationSettings(), description="query-focused summarization (notebook 05)"
    )
    judge: JudgeSettings = Field(JudgeSettings(), description="the LLM-as-judge protocols (notebooks 06, 07)")
    claims: ClaimsSettings = Field(
        ClaimsSettings(), description="claim-based comprehensiveness and diversity (notebook 08)"
    )
    cache_path: str = Field(
        "outputs/cache/ragtrial.sqlite", description="the SQLite response cache, shared by every run"
    )


def validate_settings(values: dict[str, Any], source: str) -> Settings:
    try:
        return Settings.model_validate(values)
    except ValidationError as err:
        raise params_error(source, err) from None
