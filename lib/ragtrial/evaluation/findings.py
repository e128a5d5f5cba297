"""Findings: the figures a report's prose states that no other saved table holds (a weighted win
rate, a share, a count over a grouping), computed here from the run's tables and saved by the
notebook as its `findings` table. `report/narrative/` only words saved tables, so every number in a
report's prose is a row of a saved table: the `findings` table or the table named in its `source`.

One row per figure: `statement` names the sentence that states it (one id per kind of sentence),
`subject` what it is about (a method, a pair "a vs b", a question category; "" for the run),
`figure` what the value measures in words, `value` the number, `ci_low` / `ci_high` its interval
(None without one), and `source` the saved table(s) it was computed from (comma-separated), or
`run.json` for a setting the prose quotes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

import pandas as pd

from ragtrial.stats import CLAIM_ALPHA

FINDINGS_TABLE = "findings"
FINDINGS_COLUMNS = ["statement", "subject", "figure", "value", "ci_low", "ci_high", "source"]


@dataclass(frozen=True)
class Finding:
    statement: str
    figure: str
    value: float
    source: str
    subject: str = ""
    ci_low: float | None = None
    ci_high: float | None = None


def findings_table(findings: Iterable[Finding]) -> pd.DataFrame:
    """The `findings` table: one row per figure, in the order the prose states them."""
    rows = [asdict(finding) for finding in findings]
    table = pd.DataFrame(rows, columns=FINDINGS_COLUMNS)
    for column in ("value", "ci_low", "ci_high"):
        table[column] = table[column].astype(float)
    return table


def stated(findings: pd.DataFrame, statement: str, subject: str = "") -> pd.Series:
    """The one row of `findings` for `statement` about `subject`; an error names what is missing."""
    rows = findings[(findings["statement"] == statement) & (findings["subject"] == subject)]
    if len(rows) != 1:
        raise KeyError(
            f"findings table: {len(rows)} rows for statement {statement!r}, subject {subject!r} (1 needed)"
        )
    return rows.iloc[0]


def statements(findings: pd.DataFrame, statement: str) -> pd.DataFrame:
    """Every row of `findings` for `statement`, in their saved order (one per subject)."""
    return findings[findings["statement"] == statement]


EMBEDDED_MODEL_STATEMENT = "embedded_model"


def embedded_model_finding(embedded: bool) -> Finding:
    """Whether the embedded default model answered the run: a report's disclaimer depends on it."""
    return Finding(
        EMBEDDED_MODEL_STATEMENT,
        "1 when the embedded default model answered, else 0",
        float(embedded),
        "run.json",
    )


def claim_alpha_finding() -> Finding:
    """The level the claim rule's adjusted test must reject at: a narrative that says why there is no
    claim states it.
    """
    return Finding(
        "claim_alpha", "level at which the Holm-adjusted test must reject", CLAIM_ALPHA, "ragtrial.stats"
    )


def answered_by_embedded_model(findings: pd.DataFrame) -> bool:
    """The `embedded_model_finding` of a saved findings table."""
    return bool(stated(findings, EMBEDDED_MODEL_STATEMENT)["value"] == 1)


def stated_count(findings: pd.DataFrame, statement: str, subject: str = "") -> int:
    """The value of `stated(findings, statement, subject)` as the count it is."""
    return int(stated(findings, statement, subject)["value"])
