"""`ragtrial list [--outputs DIR] [--batch NAME]`: the runs of the outputs folder as a table, from
each run folder's `run.json` (folders without one, such as cache/ and indexes/, are not runs).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragtrial.config.base import ParamsError

if TYPE_CHECKING:
    from ragtrial.report.index_page import RunRecord

LIST_COLUMNS = [
    "run",
    "label",
    "status",
    "model",
    "data",
    "calls live/cached",
    "failures",
    "wall time",
    "headline (or error)",
]
NARROWEST_HEADLINE = 24  # below this the headline says nothing; the line then wraps
DATA_SHOWN_CHARS = 40


def add_parser(sub) -> None:
    listing = sub.add_parser(
        "list",
        help="the runs in the outputs folder: status, model, data, calls, failures, wall time, headline",
    )
    listing.add_argument("--outputs", help="outputs folder (default: <project>/outputs)")
    listing.add_argument(
        "--batch", metavar="NAME", help="only the runs of this batch file (params/x.yaml, x.yaml or x)"
    )
    listing.set_defaults(handler=list_command)


def cut(text: str, width: int) -> str:
    """`text` on one line, at most `width` characters (an ellipsis marks a cut)."""
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"


def _of_batch(batch: str, name: str) -> bool:
    """Whether a run recorded with batch file `batch` belongs to the batch the user named."""
    return bool(batch) and name in (batch, Path(batch).name, Path(batch).stem)


def _wall_time(record: dict[str, Any], status: str) -> str:
    """The run's duration; a running run's time since it started."""
    from ragtrial.runner.progress import duration

    if isinstance(record.get("duration_s"), int | float):
        return duration(record["duration_s"])
    if status == "running" and record.get("started_at"):
        try:
            started = dt.datetime.fromisoformat(record["started_at"])
        except ValueError:
            return ""
        return duration((dt.datetime.now(dt.UTC) - started).total_seconds()) + " so far"
    return ""


def batch_runs(outputs: Path, batch: str | None) -> list[RunRecord]:
    """The run records of `outputs` (every one without `batch`; else those of the batch file it names,
    readable ones only); a ParamsError naming the folder's batches when none is of that batch.
    """
    from ragtrial.report.index_page import batch_file, run_records

    records = run_records(outputs)
    if not batch:
        return records
    known = sorted({b for r in records if r.record and (b := batch_file(r.record))})
    records = [r for r in records if r.record and _of_batch(batch_file(r.record), batch)]
    if not records:
        raise ParamsError(
            f"--batch {batch}: no run of that batch in {outputs} (its batches: {', '.join(known) or 'none'})"
        )
    return records


def run_rows(outputs: Path, batch: str | None = None) -> list[list[str]]:
    """One row of `LIST_COLUMNS` cells per run folder (an unreadable record says so), oldest first;
    the headline uncut.
    """
    from ragtrial.report.index_page import data_set_label, shown_status

    records = batch_runs(outputs, batch)
    rows = []
    for run in sorted(records, key=lambda r: (str((r.record or {}).get("started_at", "")), r.run_dir.name)):
        record = run.record
        if record is None:
            rows.append([run.run_dir.name, "", "unreadable", "", "", "", "", "", run.problem])
            continue
        settings, ledger, status = record.get("settings", {}), record.get("ledger", {}), shown_status(record)
        llm = settings.get("llm", {})
        model = str(llm.get("model", "")) + (" (embedded)" if llm.get("backend") == "embedded" else "")
        error = str(record.get("error", "")).splitlines()[:1] if status == "failed" else []
        rows.append(
            [
                run.run_dir.name,
                str(record.get("label", "")),
                status,
                model,
                cut(data_set_label(settings), DATA_SHOWN_CHARS),
                f"{ledger.get('llm_calls_live', 0)}/{ledger.get('llm_calls_cached', 0)}" if ledger else "",
                str(ledger.get("failures", 0)) if ledger else "",
                _wall_time(record, status),
                error[0] if error else str(record.get("headline", "")),
            ]
        )
    return rows


def list_command(args: argparse.Namespace) -> int:
    """The table, its headline column cut to the terminal's width, and the count per status."""
    from ragtrial.config.paths import outputs_dir, project_root
    from ragtrial.report.index_page import status_counts
    from ragtrial.runner.progress import text_table

    outputs = outputs_dir(project_root(), args.outputs)
    rows = run_rows(outputs, args.batch)
    if not rows:
        print(f"no runs in {outputs}")
        return 0
    used = sum(max(len(c), *(len(r[i]) for r in rows)) + 2 for i, c in enumerate(LIST_COLUMNS[:-1]))
    room = max(NARROWEST_HEADLINE, shutil.get_terminal_size((120, 24)).columns - used)
    rows = [[*row[:-1], cut(row[-1], room)] for row in rows]
    for line in text_table(LIST_COLUMNS, rows, right={5, 6, 7}):
        print(line)
    print(f"{len(rows)} run{'s' * (len(rows) != 1)} in {outputs}: {status_counts(r[2] for r in rows)}")
    return 0
