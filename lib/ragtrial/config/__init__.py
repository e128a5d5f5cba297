"""Settings: pydantic sections with defaults in code, one module per concern, and batch files.

A params file states only what it changes. Resolution order for one run:
code defaults <- batch `settings` <- run `settings` <- grid point <- command-line `--set`.
Every error names the file and the dotted key, and is raised before any model call: validation
checks types, bounds (every numeric key has them; floats are finite) and cross-field rules; the
names of data sets, methods, retrievers and corpus presets and the paths (settings marked `Names` /
`ExistingPath`) are checked by `ragtrial.runner.preflight` when the batch is expanded, as the
registries sit above config. Prompt settings are names of shipped prompts, never paths.
Every key carries a description (`ragtrial settings` lists them).
"""

from ragtrial.config.base import ParamsError, Section
from ragtrial.config.batch import RunSpec, load_batch, parse_set_overrides, settings_hash
from ragtrial.config.claims import ClaimsSettings
from ragtrial.config.data import DataSettings
from ragtrial.config.index import IndexSettings
from ragtrial.config.judge import JudgeSettings
from ragtrial.config.llm import BackendCheckSettings, EmbeddedServerSettings, EmbeddingSettings, LLMSettings
from ragtrial.config.methods import (
    AnswerSettings,
    BaselineAnswerSettings,
    MethodSettings,
    QASettings,
    SummarizationSettings,
)
from ragtrial.config.questions import QuestionsSettings, RelevanceSettings
from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.config.settings import SettingRow, Settings, describe_settings, validate_settings

__all__ = [
    "AnswerSettings",
    "BackendCheckSettings",
    "BaselineAnswerSettings",
    "ClaimsSettings",
    "DataSettings",
    "EmbeddedServerSettings",
    "EmbeddingSettings",
    "IndexSettings",
    "JudgeSettings",
    "LLMSettings",
    "MethodSettings",
    "ParamsError",
    "QASettings",
    "QuestionsSettings",
    "RelevanceSettings",
    "RetrievalSettings",
    "RunSpec",
    "Section",
    "SettingRow",
    "Settings",
    "SummarizationSettings",
    "describe_settings",
    "load_batch",
    "parse_set_overrides",
    "settings_hash",
    "validate_settings",
]
