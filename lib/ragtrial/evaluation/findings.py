"""Findings: every figure a report's prose states, as rows of one table per notebook.

A narrative (`ragtrial.report.narrative`) only words figures; it computes none. Each figure it states
is a row here, computed in `evaluation/` from the run's saved tables and saved by the notebook as its
`findings` table: `statement` (which sentence uses it, e.g. "sanity"), `subject` (what it is about: a
method, a pair, a question type; "" for the run as a whole), `figure` (what the number is, e.g.
"relative_win_rate"), `value`, `ci_low` / `ci_high` (the interval when it has one, else NaN) and
`source` (the saved table it comes from). A narrative can then be rendered from the saved tables alone,
and every number in a report traced to a table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import pandas as pd

FINDINGS_COLUMNS = ["statement", "subject", "figure", "value", "ci_low", "ci_high", "source"]


@dataclass(frozen=True)
class Finding:
    statement: str
    figure: str
    value: float
    source: str
    subject: str = ""
    ci_low: float = math.nan
    ci_high: float = math.nan


def findings_table(findings: Iterable[Finding]) -> pd.DataFrame:
    """The findings as a frame with `FINDINGS_COLUMNS` (typed, also when empty)."""
    frame = pd.DataFrame([asdict(f) for f in findings], columns=FINDINGS_COLUMNS)
    return frame.astype(
        {
            "statement": str,
            "subject": str,
            "figure": str,
            "value": float,
            "ci_low": float,
            "ci_high": float,
            "source": str,
        }
    )


class FindingsView:
    """Look-ups into a findings table (as saved), for the narrative: a figure missing is an error
    naming it, never a silent 0.
    """

    def __init__(self, table: pd.DataFrame):
        missing = set(FINDINGS_COLUMNS) - set(table.columns)
        if missing:
            raise ValueError(f"findings table: missing column(s) {', '.join(sorted(missing))}")
        self.table = table

    def rows(self, statement: str, subject: str | None = None) -> pd.DataFrame:
        """The rows of one statement (of one subject when given), in table order."""
        rows = self.table[self.table["statement"] == statement]
        return rows if subject is None else rows[rows["subject"] == subject]

    def subjects(self, statement: str) -> list[str]:
        """The subjects a statement speaks of, in table order."""
        return list(dict.fromkeys(self.rows(statement)["subject"]))

    def has(self, statement: str, figure: str, subject: str = "") -> bool:
        rows = self.rows(statement, subject)
        return bool((rows["figure"] == figure).any())

    def finding(self, statement: str, figure: str, subject: str = "") -> Finding:
        rows = self.rows(statement, subject)
        rows = rows[rows["figure"] == figure]
        if len(rows) != 1:
            raise KeyError(
                f"findings: {len(rows)} rows for statement {statement!r}, subject {subject!r}, "
                f"figure {figure!r}"
            )
        r = rows.iloc[0]
        return Finding(
            r["statement"],
            r["figure"],
            float(r["value"]),
            r["source"],
            r["subject"],
            r["ci_low"],
            r["ci_high"],
        )

    def value(self, statement: str, figure: str, subject: str = "") -> float:
        return self.finding(statement, figure, subject).value
