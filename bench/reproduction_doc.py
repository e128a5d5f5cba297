"""The measured block of docs/reproduction.md, read from the run folders of `ragtrial run
params/real_evidence.yaml` (notebook 13): per run, the methods' means over all questions (its
`summary` table), the published figures beside the kit's (`reproduction`) and its headline.

Run: .venv/bin/python bench/reproduction_doc.py [outputs]
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd
from dress_rehearsal import markdown_table  # bench/, the script's folder

MEASURES = ["recall@2", "recall@5", "all_supporting", "hits@4", "hits@10", "mrr@10"]
REPRODUCTION = ["paper", "table", "published_row", "kit_method", "kit_measure"]
RANKS = ["in_interval", "same_as_printed", "published_rank", "kit_rank"]


def cell(value: float) -> str:
    return "—" if math.isnan(value) else str(round(float(value), 3))


def markdown(header: list[str], rows: list[list[str]]) -> list[str]:
    """The lines of a Markdown table of cells already written as text."""
    return markdown_table(pd.DataFrame(rows, columns=header)).splitlines()


def run_block(run_dir: Path) -> list[str]:
    summary = pd.read_parquet(run_dir / "tables" / "summary.parquet")
    every = summary[summary["question_type"] == "all"]
    measures = [m for m in MEASURES if m in set(every["measure"])]
    means = every.pivot_table(index="method", columns="measure", values="mean", sort=False, dropna=False)
    lines = [f"### {json.loads((run_dir / 'run.json').read_text())['label']}", ""]
    lines += ["Means over all questions (—: an unranked published list has no @k measure):", ""]
    lines += markdown(
        ["method", *measures],
        [[method, *(cell(means.loc[method].get(m, math.nan)) for m in measures)] for method in means.index],
    )
    reproduction = pd.read_parquet(run_dir / "tables" / "reproduction.parquet")
    if len(reproduction):
        rows = [
            [
                *(str(r[c]) for c in REPRODUCTION),
                f"{r['published']:.6g}",  # as printed: the data file holds the paper's digits
                f"{r['kit_mean']:.3f} [{r['kit_ci_low']:.3f}, {r['kit_ci_high']:.3f}]",
                *(str(r[c]) for c in RANKS),
            ]
            for _, r in reproduction.iterrows()
        ]
        lines += [
            "",
            "Published beside the kit:",
            "",
            *markdown([*REPRODUCTION, "published", "kit", *RANKS], rows),
        ]
    headline = (run_dir / "headline.txt").read_text().strip()
    return [*lines, "", f"Headline: {headline}", ""]


def main(outputs: Path) -> None:
    records = [json.loads(p.read_text()) for p in outputs.glob("13_retrieval_benchmark-*/run.json")]
    runs = sorted((r for r in records if r["status"] == "completed"), key=lambda r: r["started_at"])
    if not runs:
        print(f"no completed run of notebook 13 in {outputs}")
        return
    seconds = sum(r["duration_s"] for r in runs)
    commit = ", ".join(dict.fromkeys(r["git_commit"][:7] for r in runs))
    print(
        f"Measured by `ragtrial run params/real_evidence.yaml` at commit `{commit}` (2 cores, cold run: "
        f"{int(seconds // 60)} min {round(seconds % 60)} s). Every figure is a cell of a run's saved tables "
        "(`summary`, `reproduction`); each run's report words the same.\n"
    )
    for run in runs:
        print("\n".join(run_block(outputs / run["run_id"])))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "outputs"))
