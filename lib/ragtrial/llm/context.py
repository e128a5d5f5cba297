"""What library code needs of a run: its settings and its doors to a model.

Stages below the runner (index build, methods, backend check) take a `ModelContext`, so they never
import the runner; `ragtrial.runner.context.RunContext` is the implementation notebooks get.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ragtrial.config import Settings
from ragtrial.llm.client import LLM
from ragtrial.llm.embedder import Embedder
from ragtrial.llm.ledger import Ledger


class ModelContext(Protocol):
    settings: Settings
    run_id: str
    run_dir: Path  # where a stage keeps its logs and records beside the run's tables
    ledger: Ledger
    llm: LLM
    embedder: Embedder
