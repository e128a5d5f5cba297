"""Notebook 10's findings: the counts its notes state (runs skipped, questions left out, verdicts
beyond the headline's), the prices money is computed at, and the tables its notes word: which
measures were read (`measures_read`) and what was left out, counted per measure and reason
(`left_out_counts`). The verdict's own figures are in the verdict tables (`verdicts`, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from ragtrial.evaluation.findings import Finding, claim_alpha_finding, embedded_model_finding, findings_table
from ragtrial.evaluation.verdict import Pricing

RUNS_SKIPPED = "runs skipped"
LEFT_OUT = "questions left out"
LEFT_OUT_REASONS_UNLISTED = "left-out reasons not listed"
MORE_VERDICTS = "verdicts beyond the headline's"
PRICE = "price per million tokens"  # subject: prompt, completion, embedding; no row: not priced
# The left-out reasons a report lists; the others are counted and in the `left_out_counts` table.
LEFT_OUT_REASONS_SHOWN = 8


def combined_runs_findings(skipped_runs: pd.DataFrame) -> list[Finding]:
    return [
        Finding(RUNS_SKIPPED, "runs in the outputs folder not combined", len(skipped_runs), "skipped_runs")
    ]


def left_out_counts(left_out: pd.DataFrame) -> pd.DataFrame:
    """Paired questions left out, per measure and reason, the most frequent first."""
    counts = left_out.groupby(["measure", "reason"], sort=False).size().sort_values(ascending=False)
    return counts.rename("questions").reset_index()


def measures_read_table(read: Sequence[str], unread: Mapping[str, str]) -> pd.DataFrame:
    """Each measure the verdict could read: whether it read it, and why not (`reason`)."""
    rows = [(m, True, "") for m in read] + [(m, False, why) for m, why in unread.items()]
    return pd.DataFrame(rows, columns=["measure", "read", "reason"])


def verdict_findings(
    skipped_runs: pd.DataFrame,
    left_out: pd.DataFrame,
    verdicts: pd.DataFrame,
    pricing: Pricing,
    embedded: bool,
) -> pd.DataFrame:
    """Notebook 10's `findings` table."""
    reasons = len(left_out_counts(left_out)) if len(left_out) else 0
    prices = {"prompt": pricing.prompt, "completion": pricing.completion, "embedding": pricing.embedding}
    return findings_table(
        [
            *combined_runs_findings(skipped_runs),
            Finding(LEFT_OUT, "paired questions never scored", len(left_out), "left_out"),
            Finding(
                LEFT_OUT_REASONS_UNLISTED,
                f"(measure, reason) pairs beyond the first {LEFT_OUT_REASONS_SHOWN}",
                max(0, reasons - LEFT_OUT_REASONS_SHOWN),
                "left_out",
            ),  # fmt: skip
            Finding(
                MORE_VERDICTS,
                "verdict sentences besides the headline's",
                max(0, len(verdicts) - 1),
                "verdicts",
            ),  # fmt: skip
            *[
                Finding(PRICE, f"{tokens} tokens' price (verdict money)", price, "run.json", subject=tokens)
                for tokens, price in prices.items()
                if price is not None
            ],
            claim_alpha_finding(),
            embedded_model_finding(embedded),
        ]
    )
