"""A run's live progress for the terminal: the fan-out stages running in a notebook kernel.

`ragtrial run` executes notebooks in kernels of their own, so what a stage has done is written where
the runner can read it: `<run folder>/progress.json` (the run folder is the ledger's), holding each
running stage's label, units done of total, its calls (live, cached, failed) and when it started. The
file is replaced whole (never seen half-written) when the outer stage starts or ends, and at most
every `WRITE_EVERY_S` otherwise. It only reports: no call depends on it, and a write that fails
(a folder being cleared) is skipped rather than failing the run.

Under `ragtrial run` (`BATCH_ENV` set for the kernel) the stages print nothing into the notebook,
which would otherwise end up in the report; run interactively they print their progress lines.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from ragtrial.llm.ledger import Ledger

PROGRESS_FILE = "progress.json"
WRITE_EVERY_S = 2.0
# Set to "1" in the notebook kernels `ragtrial run` starts.
BATCH_ENV = "RAGTRIAL_BATCH"


def in_batch() -> bool:
    """Whether this process is a notebook kernel of `ragtrial run` (progress goes to the file only)."""
    return os.environ.get(BATCH_ENV) == "1"


class Stage(Protocol):
    def state(self) -> dict[str, Any]:
        """label, done, total, live, cached, failed, started_at (seconds since the epoch)."""
        ...


class ProgressBoard:
    """The stages running in one run folder, in the order they started, and the file that shows them."""

    def __init__(self, path: Path):
        self.path = path
        self._stages: list[Stage] = []
        self._lock = threading.Lock()
        self._written_at = float("-inf")

    def open(self, stage: Stage) -> None:
        with self._lock:
            self._stages.append(stage)
            self._write_if(len(self._stages) == 1)

    def advanced(self) -> None:
        """A unit finished: rewrite the file if it is older than `WRITE_EVERY_S`."""
        with self._lock:
            self._write_if(False)

    def close(self, stage: Stage) -> None:
        with self._lock:
            self._stages.remove(stage)
            self._write_if(not self._stages)

    def _write_if(self, outer_stage_changed: bool) -> None:
        """Write when the outer stage started or ended, else at most every `WRITE_EVERY_S` (inner stages
        of a unit may start and end many times a second).
        """
        if outer_stage_changed or time.monotonic() - self._written_at >= WRITE_EVERY_S:
            self._write()

    def _write(self) -> None:
        record = {"pid": os.getpid(), "written_at": time.time(), "stages": [s.state() for s in self._stages]}
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            partial.write_text(json.dumps(record), encoding="utf-8")
            os.replace(partial, self.path)
        except OSError:
            partial.unlink(missing_ok=True)
            return
        self._written_at = time.monotonic()


_BOARDS: dict[Path, ProgressBoard] = {}
_BOARDS_LOCK = threading.Lock()


def board_for(ledger: Ledger | None) -> ProgressBoard | None:
    """The board of the run folder `ledger` writes in (None for a ledger kept in memory only)."""
    if ledger is None or ledger.path is None:
        return None
    path = Path(ledger.path).parent / PROGRESS_FILE
    with _BOARDS_LOCK:
        return _BOARDS.setdefault(path, ProgressBoard(path))


def read_progress(run_dir: Path) -> dict[str, Any] | None:
    """The run folder's progress record, or None when there is none (no stage ran yet) or it is unreadable."""
    try:
        record = json.loads((Path(run_dir) / PROGRESS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None
