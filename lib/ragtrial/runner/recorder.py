"""What a batch says and writes of its runs as they go, whichever engine executes them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragtrial.config.batch import RunSpec
from ragtrial.report.index_page import render_index
from ragtrial.runner.execute import RunResult
from ragtrial.runner.progress import BatchMonitor, duration, summary_table


class BatchRecorder:
    """What a batch says and writes of its runs as they go, whichever engine executes them: a line when
    a run is picked up; the index page and the progress monitor when it starts; its result line, the
    index page, its export to MLflow when asked for, and its row of the closing table when it ends.
    Runs are named by their position in the batch (from 1).
    """

    def __init__(
        self,
        specs: list[RunSpec],
        outputs: Path,
        log,
        monitor: BatchMonitor,
        export: Callable[[Path], str] | None = None,
    ):
        self.specs, self.outputs, self.log, self.monitor = specs, outputs, log, monitor
        # `ragtrial run --mlflow`: each completed run exported as it ends, the outcome as a log line
        self.export = export
        self.rows: dict[str, dict[str, Any]] = {}
        # one page at a time, so a later render never loses to an earlier one
        self._index_lock = threading.Lock()

    def position(self, i: int) -> str:
        return f"[{i}/{len(self.specs)}]"

    def index(self) -> None:
        with self._index_lock:
            render_index(self.outputs)

    def picked(self, i: int, where: str = "") -> None:
        spec = self.specs[i - 1]
        label = f" {spec.label}" if spec.label else ""
        self.log(f"{self.position(i)} {spec.run_id}{label} ...{where}")

    def started(self, i: int, run_dir: Path) -> None:
        self.index()  # the page no longer links what the clearing of the run's folder removed
        self.monitor.started(self.position(i), self.specs[i - 1].run_id, run_dir)

    def finished(self, i: int, result: RunResult, seconds: float) -> None:
        spec = self.specs[i - 1]
        self.monitor.finished(spec.run_id)
        s = result.summary
        self.log(
            f"{self.position(i)} {spec.run_id}: {result.status} (live calls {s.get('llm_calls_live', 0)}, "
            f"cached {s.get('llm_calls_cached', 0)}, failures {s.get('failures', 0)}; "
            f"{duration(seconds)})" + (f" -- {result.error.splitlines()[0]}" if result.error else "")
        )
        self.index()
        if self.export is not None and result.status in ("completed", "skipped"):
            self.log(f"{self.position(i)} {self.export(result.run_dir)}")
        self.rows[spec.run_id] = {
            "run": spec.run_id,
            "label": spec.label,
            "status": result.status,
            "summary": s,
            "seconds": seconds,
        }

    def summary(self, batch_seconds: float) -> list[str]:
        return summary_table([self.rows[spec.run_id] for spec in self.specs], batch_seconds)
