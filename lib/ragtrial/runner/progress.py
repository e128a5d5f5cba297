"""What a batch says on the terminal while it runs and when it ends.

While notebooks run, a monitor thread reads each running run's progress file (written by its
kernel, `ragtrial.llm.progress`) every `POLL_EVERY_S` and logs one line per run, e.g.
`[4/11] 04_rag_vs_graphrag_qa-ab12 · answers 12/40 · calls 30 live 2 cached · 1m32s`, or
`... · still running · ledger 31 live 2 cached · 1m47s` between stages. A run whose line would say
nothing new since its last is quiet for up to `QUIET_UP_TO_S`. The batch ends with a table of its
runs (status, calls, failures, wall time).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ragtrial.llm.ledger import read_ledger
from ragtrial.llm.progress import read_progress
from ragtrial.report.index_page import status_counts

POLL_EVERY_S = 15.0
QUIET_UP_TO_S = 60.0


def duration(seconds: float) -> str:
    """`42s`, `1m32s`, `2h05m`."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _calls(live: int, cached: int, failed: int) -> str:
    return f"{live} live {cached} cached" + (f" {failed} failed" if failed else "")


def _ledger_calls(run_dir: Path) -> str:
    """The run's model calls so far, from its ledger (embeddings not counted)."""
    try:
        ledger = read_ledger(run_dir / "ledger.csv")
    except (OSError, ValueError, pd.errors.ParserError):  # a row being appended
        return ""
    calls = ledger[ledger["kind"] != "embedding"]
    cached = calls["cached"].astype(str).str.lower() == "true"
    return "ledger " + _calls(int((~cached).sum()), int(cached.sum()), int((calls["failure"] != "").sum()))


def progress_state(run_dir: Path) -> str:
    """What the run is doing: its stages (outermost first, and the latest inner one) with units done
    of total and the outer stage's calls, or, between stages, "still running" and its ledger's calls.
    """
    record = read_progress(run_dir) or {}
    stages = [s for s in record.get("stages", []) if isinstance(s, dict)]
    if not stages:
        return " · ".join(part for part in ("still running", _ledger_calls(run_dir)) if part)
    outer = stages[0]
    shown = [outer] + stages[1:][-1:]
    where = " › ".join(f"{s.get('label') or 'stage'} {s.get('done', 0)}/{s.get('total', '?')}" for s in shown)
    calls = _calls(outer.get("live", 0), outer.get("cached", 0), outer.get("failed", 0))
    return f"{where} · calls {calls}"


@dataclass
class _Running:
    position: str
    run_id: str
    run_dir: Path
    started: float
    last_state: str = ""
    logged_at: float = float("-inf")


class BatchMonitor:
    """`with BatchMonitor(log):` logs the progress of the runs between `started` and `finished`."""

    def __init__(self, log, every_s: float = POLL_EVERY_S):
        self.log, self.every_s = log, every_s
        self._running: dict[str, _Running] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ragtrial-progress", daemon=True)

    def __enter__(self) -> BatchMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def started(self, position: str, run_id: str, run_dir: Path) -> None:
        with self._lock:
            self._running[run_id] = _Running(position, run_id, run_dir, time.monotonic())

    def finished(self, run_id: str) -> None:
        with self._lock:
            self._running.pop(run_id, None)

    def _watch(self) -> None:
        while not self._stop.wait(self.every_s):
            with self._lock:
                running = list(self._running.values())
            for run in running:
                state, now = progress_state(run.run_dir), time.monotonic()
                if state == run.last_state and now - run.logged_at < QUIET_UP_TO_S:
                    continue
                run.last_state, run.logged_at = state, now
                self.log(f"{run.position} {run.run_id} · {state} · {duration(now - run.started)}")


SUMMARY_COLUMNS = ["run", "label", "status", "live calls", "cached calls", "failures", "wall time"]


def text_table(
    columns: list[str], rows: list[list[str]], right: set[int], total: list[str] | None = None
) -> list[str]:
    """Rows of cells as aligned lines: the header, a rule, the rows, and (when given) a rule and the
    totals; the columns numbered in `right` are right-aligned (`ragtrial run`'s summary, `ragtrial list`).
    """
    every = [columns, *rows, *([total] if total else [])]
    widths = [max(len(row[i]) for row in every) for i in range(len(columns))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return [line(columns), rule, *(line(row) for row in rows), *([rule, line(total)] if total else [])]


def summary_table(rows: list[dict[str, Any]], batch_seconds: float) -> list[str]:
    """The batch's closing table as text lines: one row per run (`run`, `label`, `status`, `summary`
    (the ledger summary), `seconds`), then the totals with the batch's wall time (runs may overlap).
    """
    table = [
        [
            r["run"],
            r["label"],
            r["status"],
            str(r["summary"].get("llm_calls_live", 0)),
            str(r["summary"].get("llm_calls_cached", 0)),
            str(r["summary"].get("failures", 0)),
            duration(r["seconds"]),
        ]
        for r in rows
    ]
    total = [
        f"{len(rows)} run" + ("" if len(rows) == 1 else "s"),
        "",
        status_counts(r["status"] for r in rows),
        str(sum(int(r[3]) for r in table)),
        str(sum(int(r[4]) for r in table)),
        str(sum(int(r[5]) for r in table)),
        duration(batch_seconds),
    ]
    return text_table(SUMMARY_COLUMNS, table, {3, 4, 5, 6}, total)
