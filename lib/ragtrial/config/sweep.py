"""Settings of a sweep report (notebook 15): a grid's points read as one report."""

from __future__ import annotations

from pydantic import Field

from ragtrial.config.methods import FamilyWiseLevel, Resampling


class SweepSettings(Resampling, FamilyWiseLevel):
    """Notebook 15 (ragtrial.runner.sweep_runs): every point of a grid against its first point on the
    same questions, each measure against each varied key, a heatmap over two keys, the best point per
    measure against the runner-up, and each point's cost. A batch entry with a `grid` adds this run
    after its points, with `sweep.runs` naming them.
    """

    runs: list[str] = Field(
        [],
        description="the grid's points: run ids (or unique prefixes), the first the reference of the others; "
        "empty: this batch's completed runs of `sweep.notebook`, in batch order",
    )
    notebook: str = Field(
        "04_rag_vs_graphrag_qa",
        description="the notebook whose batch runs are the points when `sweep.runs` is empty",
    )
    keys: list[str] = Field(
        [],
        description="the varied settings (dotted keys, the grid's); empty: every key whose value differs "
        "between the points",
    )
    heatmap: list[str] = Field(
        [],
        description="the two varied keys of the heatmap; empty: the varied keys when there are exactly two "
        "(no heatmap otherwise)",
    )
