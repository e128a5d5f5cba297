"""Notebook 00's findings: how many probes ran and how many failed (table `probes`)."""

from __future__ import annotations

import pandas as pd

from ragtrial.evaluation.findings import Finding, findings_table

PROBES, PROBES_FAILED = "probes", "probes failed"


def backend_findings(probes: pd.DataFrame) -> pd.DataFrame:
    failed = int((probes["failure"] != "").sum())
    return findings_table(
        [
            Finding(PROBES, "probes run", len(probes), "probes"),
            Finding(PROBES_FAILED, "probes whose call failed (a recorded failure)", failed, "probes"),
        ]
    )
