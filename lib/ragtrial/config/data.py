"""Settings of the data set a run reads (`ragtrial.data`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ragtrial.config.base import Section


class DataSettings(Section):
    dataset: str = "generated"  # a name in ragtrial.data.LOADERS, or "generated"
    path: str | None = None
    size: str = "small"  # generated corpus preset
    seed: int = 0
    limit_questions: int | None = None
    limit_documents: int | None = None
    options: dict[str, Any] = Field(default_factory=dict)
