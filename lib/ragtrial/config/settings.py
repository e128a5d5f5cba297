"""The root `Settings` of a run: one section per concern, and its validation with errors that
name the source and the dotted key.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ragtrial.config.base import Section, params_error
from ragtrial.config.claims import ClaimsSettings
from ragtrial.config.data import DataSettings
from ragtrial.config.index import IndexSettings
from ragtrial.config.judge import JudgeSettings
from ragtrial.config.llm import BackendCheckSettings, EmbeddingSettings, LLMSettings
from ragtrial.config.methods import QASettings, SummarizationSettings
from ragtrial.config.questions import QuestionsSettings
from ragtrial.config.retrieval import RetrievalSettings


class Settings(Section):
    llm: LLMSettings = LLMSettings()
    embeddings: EmbeddingSettings = EmbeddingSettings()
    data: DataSettings = DataSettings()
    backend_check: BackendCheckSettings = BackendCheckSettings()
    index: IndexSettings = IndexSettings()
    judge: JudgeSettings = JudgeSettings()
    qa: QASettings = QASettings()
    summarization: SummarizationSettings = SummarizationSettings()
    questions: QuestionsSettings = QuestionsSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    claims: ClaimsSettings = ClaimsSettings()
    cache_path: str = "outputs/cache/ragtrial.sqlite"


def validate_settings(values: dict[str, Any], source: str) -> Settings:
    try:
        return Settings.model_validate(values)
    except ValidationError as err:
        raise params_error(source, err) from None
