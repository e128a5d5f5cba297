"""Settings of the data set a run reads (`ragtrial.data`)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from ragtrial.config.base import ExistingPath, Names, Section, conflict


class DataSettings(Section):
    """The data set: the generated corpus, or a real one read from its folder, optionally sampled."""

    dataset: Annotated[str, Names("data set", also=("generated",))] = Field(
        "generated", description='a name in ragtrial.data.LOADERS, or "generated"'
    )
    path: Annotated[str | None, ExistingPath("folder")] = Field(
        None, description="the data set's folder; required unless dataset is generated"
    )
    size: Annotated[str, Names("corpus size")] = Field(
        "small", description="generated corpus preset: tiny, small, medium or large"
    )
    seed: int = Field(
        0, ge=0, description="seed of the generated corpus and of the question and document samples"
    )
    limit_questions: int | None = Field(
        None,
        ge=1,
        description="real data sets: keep a seeded sample of this many questions (in their order); None: all",
    )
    limit_documents: int | None = Field(
        None,
        ge=0,
        description="real data sets: keep every gold document of the kept questions, then fill up to this "
        "many with a seeded sample of the others (0: the gold documents only); None: all",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="further keyword options of the data set's loader (checked against its signature)",
    )

    @model_validator(mode="after")
    def _real_data_set_has_a_folder(self) -> DataSettings:
        if self.dataset != "generated" and not self.path:
            raise conflict("path", f"required for data set {self.dataset!r}")
        return self
