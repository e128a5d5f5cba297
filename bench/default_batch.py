"""The default-batch table of docs/performance.md, read from the run folders of a `make run`.

Run: .venv/bin/python bench/default_batch.py [outputs]
One row per notebook: wall time (`run.json` duration), model time (Σ live latency in its ledger;
calls overlap up to the embedded server's slots, so it can exceed the wall time),
live and cached LLM calls, live tokens and recorded failures, and the batch's total wall time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ragtrial.llm.ledger import read_ledger, summarize


def main(outputs: Path) -> None:
    print(
        "| notebook | wall s | model s | live calls | cached | live prompt / completion tokens | failures |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    wall = model = 0.0
    for run_json in sorted(outputs.glob("*/run.json")):
        run = json.loads(run_json.read_text())
        if run.get("status") != "completed":
            continue
        totals = summarize(read_ledger(run_json.parent / "ledger.csv"))
        wall += run["duration_s"]
        model += totals["model_seconds"]
        print(
            f"| {run['notebook']} | {run['duration_s']:.0f} | {totals['model_seconds']:.0f} "
            f"| {totals['llm_calls_live']} | {totals['llm_calls_cached']} "
            f"| {totals['live_prompt_tokens']:,} / {totals['live_completion_tokens']:,} "
            f"| {totals['failures']} |"
        )
    print(
        f"\nnotebooks' wall time {wall / 60:.1f} min; Σ call latency {model / 60:.1f} min "
        f"({model / wall:.2f} × the wall time: calls in flight at once)"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "outputs"))
