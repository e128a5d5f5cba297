"""Run folders written by hand for the tests that read runs without executing a notebook (`ragtrial
compare`, the sweep, the index page): a run.json with recorded settings and notebook 04's scores table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from ragtrial.config.settings import Settings

QA = "04_rag_vs_graphrag_qa"


def write_run(
    outputs: Path,
    run_id: str,
    accuracy: list[float],
    *,
    notebook: str = QA,
    settings: dict[str, Any] | None = None,
    status: str = "completed",
    recall: list[float] | None = None,
    extra: dict[str, Any] | None = None,
    recorded: dict[str, Any] | None = None,
    methods: tuple[str, ...] = ("hybrid",),
) -> Path:
    """A run folder with run.json (`recorded` settings, else the defaults, with `settings`' dotted
    `section.key` values; a ledger of 100 prompt tokens and one live call per question; `extra` record
    fields) and notebook 04's scores table (each of `methods` with the same scores: questions q0, q1,
    ...; f1 equal to accuracy; recall@5 `recall`, else 0.5).
    """
    run_dir = Path(outputs) / run_id
    (run_dir / "tables").mkdir(parents=True)
    recorded = recorded or Settings().model_dump(mode="json")
    for key, value in (settings or {}).items():
        section, name = key.split(".")
        recorded[section][name] = value
    record = {"run_id": run_id, "notebook": notebook, "label": "", "status": status, "settings": recorded}
    record |= {"ledger": {"prompt_tokens": 100 * len(accuracy), "llm_calls_live": len(accuracy)}}
    (run_dir / "run.json").write_text(json.dumps(record | (extra or {})))
    n = len(accuracy)
    scores = pd.DataFrame(
        {
            "question_id": [f"q{i}" for i in range(n)],
            "question_type": "single_hop",
            "failure": "",
            "accuracy": [float(a) for a in accuracy],
            "f1": [float(a) for a in accuracy],
            "recall@5": [float(r) for r in recall] if recall is not None else 0.5,
        }
    )
    pd.concat([scores.assign(method=method) for method in methods], ignore_index=True).to_parquet(
        run_dir / "tables" / "scores.parquet"
    )
    return run_dir
