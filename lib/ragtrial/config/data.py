"""Settings of the data set a run reads (`ragtrial.data`), and the data root its paths are relative to.

Data locations come from one place: a relative `data.path` (or `index.import_path`) is a folder
under the data root, the environment variable RAGTRIAL_DATA_ROOT, or the project's `data/` folder
when it is unset. Params files name a data set's folder only, so they run on any machine; the root
is read when a path is resolved, never stored in settings (so settings hashes and caches do not
depend on where a machine keeps its data).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ragtrial.config import paths
from ragtrial.config.base import ExistingPath, Names, Section, conflict


class DataSettings(Section):
    """The data set: the generated corpus, or a real one read from its folder, optionally sampled."""

    dataset: Annotated[str, Names("data set", also=("generated",))] = Field(
        "generated", description='a name in ragtrial.data.LOADERS, or "generated"'
    )
    path: Annotated[str | None, ExistingPath("folder", under="data")] = Field(
        None,
        description="the data set's folder, relative to the data root ($RAGTRIAL_DATA_ROOT, default data/) "
        "unless absolute; required unless dataset is generated",
    )
    size: Annotated[str, Names("corpus size")] = Field(
        "small",
        description="generated corpus preset: tiny, small, medium, large or diagnostics (seed 004's "
        "suite: the medium world, 380 questions across single_hop, multi_hop, temporal, contradictory)",
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
    question_plan: Literal["templates", "schema"] = Field(
        "templates",
        description="generated corpus: the questions' source; templates (the question kinds of "
        "ragtrial.data.synthetic) or schema (ragtrial.data.schema_questions: per relation type and "
        "direction, seed 004's schema-driven test set over the gold graph); the documents are the same",
    )
    questions_per_relation: int = Field(
        2,
        ge=1,
        description="question_plan schema: questions per relation type of each of single_hop, temporal "
        "and multi_hop (every conflict is asked as a contradictory question); the seed asks at least 2",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="further keyword options of the data set's loader (checked against its signature)",
    )

    @model_validator(mode="after")
    def _real_data_set_has_a_folder(self) -> DataSettings:
        if self.dataset != "generated" and not self.path:
            raise conflict("path", f"required for data set {self.dataset!r}")
        if self.dataset != "generated" and self.question_plan != "templates":
            raise conflict(
                "question_plan", "only the generated corpus has a gold graph to plan questions from"
            )
        return self


DATA_ROOT_ENV = "RAGTRIAL_DATA_ROOT"
DEFAULT_DATA_ROOT = "data"


def data_root(project_root: Path | None = None) -> Path:
    """The folder relative data paths live in: $RAGTRIAL_DATA_ROOT (itself relative to the project
    root when relative), else `data/` in the project root (default: `config.paths.project_root()`, found
    from the working directory).
    """
    root = paths.project_root() if project_root is None else Path(project_root)
    value = os.environ.get(DATA_ROOT_ENV, "").strip()
    base = Path(value).expanduser() if value else Path(DEFAULT_DATA_ROOT)
    return base if base.is_absolute() else root / base


def data_path(value: str | Path, project_root: Path | None = None) -> Path:
    """A data setting's path as a location: absolute as given, relative under `data_root`."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else data_root(project_root) / path


def data_root_origin() -> str:
    """Where the data root came from, for error messages."""
    value = os.environ.get(DATA_ROOT_ENV, "").strip()
    if value:
        return f"{DATA_ROOT_ENV}={value}"
    return f"{DATA_ROOT_ENV} unset, so the project's {DEFAULT_DATA_ROOT}/"


def data_path_setting(folder: str | Path, project_root: Path | None = None) -> str:
    """The `data.path` value naming `folder`: relative to `data_root` when it is under it (a params
    file that runs on any machine), else absolute.
    """
    location = Path(folder).expanduser().resolve()
    root = data_root(project_root).resolve()
    return location.relative_to(root).as_posix() if location.is_relative_to(root) else str(location)
