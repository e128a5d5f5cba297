"""The root `Settings` of a run: one section per concern; its validation with errors that name the
source and the dotted key; and the listing of every key (`ragtrial settings`).
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterator
from typing import Any, NamedTuple

from pydantic import Field, ValidationError

from ragtrial.config.base import ExistingPath, Names, ParamsError, Section, params_error
from ragtrial.config.benchmark import BenchmarkSettings
from ragtrial.config.cache import CacheSettings
from ragtrial.config.calibration import CalibrationSettings
from ragtrial.config.claims import ClaimsSettings
from ragtrial.config.compare import CompareSettings
from ragtrial.config.data import DataSettings
from ragtrial.config.diagnostics import DiagnosticsSettings
from ragtrial.config.index import IndexSettings
from ragtrial.config.judge import JudgeSettings
from ragtrial.config.llm import BackendCheckSettings, EmbeddingSettings, LLMSettings
from ragtrial.config.methods import MethodSettings, QASettings, SummarizationSettings
from ragtrial.config.questions import QuestionsSettings
from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.config.store import StoreSettings
from ragtrial.config.sweep import SweepSettings
from ragtrial.config.systems import SystemsSettings, UpstreamComparisonSettings
from ragtrial.config.verdict import VerdictSettings


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
    store: StoreSettings = Field(
        StoreSettings(),
        description="the index in a database: PostgreSQL and Cypher twins of retrievers, your own database",
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
    diagnostics: DiagnosticsSettings = Field(
        DiagnosticsSettings(),
        description="retrieval diagnostics by question category and failure attribution (notebook 09)",
    )
    benchmark: BenchmarkSettings = Field(
        BenchmarkSettings(),
        description="the LLM-free retrieval benchmark on a data set's gold passages, with other systems' "
        "published retrieval results (notebook 13)",
    )
    verdict: VerdictSettings = Field(
        VerdictSettings(),
        description="the verdict per question type: quality against the baseline, cost with indexing, "
        "break-even and power (notebook 10)",
    )
    compare: CompareSettings = Field(
        CompareSettings(),
        description="runs compared measure by measure on the same questions (notebook 14, ragtrial compare)",
    )
    sweep: SweepSettings = Field(
        SweepSettings(),
        description="a grid's points read as one report: each measure against each varied key, paired to the "
        "first point, the best point per measure and each point's cost (notebook 15)",
    )
    systems: SystemsSettings = Field(
        SystemsSettings(),
        description="the upstream systems on trial (GraphRAG, LightRAG, fast-graphrag): their environments, "
        "indexes and searches",
    )
    upstream: UpstreamComparisonSettings = Field(
        UpstreamComparisonSettings(),
        description="each upstream system beside the kit's reimplementation of it (notebook 11)",
    )
    calibration: CalibrationSettings = Field(
        CalibrationSettings(),
        description="judge-protocol calibration by simulation, fitted to a notebook-06 audit (notebook 12)",
    )
    cache: CacheSettings = Field(
        CacheSettings(),
        description="the response cache every run shares: a SQLite file or a PostgreSQL database",
    )


def validate_settings(values: dict[str, Any], source: str) -> Settings:
    try:
        return Settings.model_validate(values)
    except ValidationError as err:
        raise params_error(source, err) from None


# ---------------------------------------------------------------- names and paths to check


class MarkedValue(NamedTuple):
    """A value of a setting marked `Names` or `ExistingPath` (`ragtrial.runner.preflight` checks it)."""

    key: str
    marker: Names | ExistingPath
    value: Any


def _marked(key: str, annotation: Any, metadata: tuple[Any, ...], value: Any) -> Iterator[MarkedValue]:
    if value is None:
        return
    yield from (MarkedValue(key, m, value) for m in metadata if isinstance(m, (Names, ExistingPath)))
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        yield from _marked(key, args[0], args[1:], value)
    elif origin in (typing.Union, types.UnionType):
        for arg in args:
            yield from _marked(key, arg, (), value)
    elif origin is list and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _marked(f"{key}.{i}", args[0], (), item)
    elif origin is tuple and isinstance(value, tuple):
        for i, (arg, item) in enumerate(zip(args, value, strict=True)):
            yield from _marked(f"{key}.{i}", arg, (), item)


def marked_values(section: Section, prefix: str = "") -> Iterator[MarkedValue]:
    """Every value of `section` (recursively) whose setting is marked as a registry name or a path."""
    for name, field in type(section).model_fields.items():
        value = getattr(section, name)
        if isinstance(value, Section):
            yield from marked_values(value, f"{prefix}{name}.")
        else:
            yield from _marked(prefix + name, field.annotation, tuple(field.metadata), value)


# ---------------------------------------------------------------- the listing of every key


class SettingRow(NamedTuple):
    """One key of `Settings`: a section (default None; its keys follow) or a value (default as JSON)."""

    key: str
    type: str
    default: str | None
    description: str


def _type_name(annotation: Any) -> str:
    """A type as a params file writes it: Literal values as JSON, no pydantic metadata."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in args)}]"
    return "None" if annotation is type(None) else annotation.__name__


# pydantic keeps a field's bounds as annotated_types metadata (Ge(ge=1), MinLen(min_length=1), ...).
_BOUNDS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "min_length": "length >="}


def _bounds(metadata: list[Any]) -> str:
    shown = [
        f"{sign} {getattr(m, name)}" for m in metadata for name, sign in _BOUNDS.items() if hasattr(m, name)
    ]
    return f" ({', '.join(shown)})" if shown else ""


def _rows(section: type[Section], prefix: str) -> Iterator[SettingRow]:
    for name, field in section.model_fields.items():
        key, annotation = prefix + name, field.annotation
        if isinstance(annotation, type) and issubclass(annotation, Section):
            yield SettingRow(key, annotation.__name__, None, field.description or "")
            yield from _rows(annotation, f"{key}.")
        else:
            default = json.dumps(field.get_default(call_default_factory=True))
            kind = _type_name(annotation) + _bounds(field.metadata)
            yield SettingRow(key, kind, default, field.description or "")


def describe_settings(section: str | None = None) -> list[SettingRow]:
    """Every dotted key of `Settings` with its type, default and description, each section before
    its keys; with `section`, only that section's (or that key's) rows.
    """
    rows = list(_rows(Settings, ""))
    if section is None:
        return rows
    chosen = [r for r in rows if r.key == section or r.key.startswith(f"{section}.")]
    if not chosen:
        raise ParamsError(
            f"no settings key or section {section!r}; top-level keys: {', '.join(Settings.model_fields)}"
        )
    return chosen
