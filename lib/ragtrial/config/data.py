"""Settings of the data set a run reads (`ragtrial.data`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ragtrial.config.base import Section


class DataSettings(Section):
    """The data set: the generated corpus, or a real one read from its folder, optionally sampled."""

    dataset: str = Field("generated", description='a name in ragtrial.data.LOADERS, or "generated"')
    path: str | None = Field(None, description="the data set's folder; required unless dataset is generated")
    size: str = Field("small", description="generated corpus preset: tiny, small, medium or large")
    seed: int = Field(0, description="seed of the generated corpus and of the question and document samples")
    limit_questions: int | None = Field(
        None,
        description="real data sets: keep a seeded sample of this many questions (in their order); None: all",
    )
    limit_documents: int | None = Field(
        None,
        description="real data sets: keep every gold document of the kept questions, then fill up to this "
        "many with a seeded sample of the others; None: all",
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="further keyword options of the data set's loader"
    )
