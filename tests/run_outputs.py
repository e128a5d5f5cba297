"""What two executions of the same runs are compared on: each run folder's result tables and ledger,
without the columns that time a call or a stage, rows in a fixed order. For tests and benchmarks.

Test-side code beside `latency_server.py`: `bench/ray_batch.py` compares its legs with it too.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd

# Columns (and ledger summary keys) that time a call or a stage, not what it returned.
TIMING_COLUMNS = {"latency_s", "wall_s", "model_s", "model_seconds", "seconds", "tokens_per_s", "duration_s"}


def run_tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    """The run's tables (`tables/*.parquet`) and its ledger (`ledger`), untimed, as text, sorted."""
    tables = {p.name: pd.read_parquet(p) for p in sorted((Path(run_dir) / "tables").glob("*.parquet"))}
    tables["ledger"] = pd.read_csv(Path(run_dir) / "ledger.csv", keep_default_na=False)
    shown = {}
    for name, table in tables.items():
        table = table.drop(columns=[c for c in table.columns if c in TIMING_COLUMNS])
        shown[name] = table.astype(str).sort_values(list(table.columns)).reset_index(drop=True)
    return shown


def fingerprint(outputs: Path) -> str:
    """sha256 over every run folder's `run_tables` under `outputs`, in run id order."""
    digest = hashlib.sha256()
    for run_dir in sorted(p.parent for p in Path(outputs).glob("*/run.json")):
        for name, table in run_tables(run_dir).items():
            digest.update(f"{run_dir.name}/{name}\0".encode() + table.to_json(orient="split").encode())
    return digest.hexdigest()
