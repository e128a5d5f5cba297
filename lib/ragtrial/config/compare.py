"""Settings of the comparison of runs (notebook 14, `ragtrial compare`): which runs, paired or not."""

from __future__ import annotations

from pydantic import Field

from ragtrial.config.methods import FamilyWiseLevel, Resampling


class CompareSettings(Resampling, FamilyWiseLevel):
    """Notebook 14 (ragtrial.runner.compared_runs): each later run against the first, measure by
    measure on the questions both asked, with the settings that differ, cost and latency deltas and the
    questions that flipped.
    """

    runs: list[str] = Field(
        [],
        description="run ids (or unique prefixes) to compare, the first the reference of the others; empty: "
        "this batch's completed runs of `compare.notebook` (a grid's points), in batch order",
    )
    notebook: str = Field(
        "04_rag_vs_graphrag_qa",
        description="the notebook whose batch runs are compared when `compare.runs` is empty",
    )
    unpaired: bool = Field(
        False,
        description="compare runs that asked different questions as independent samples (Fisher's exact "
        "test on 0/1 measures, Mann-Whitney U otherwise); false: such runs are refused, naming the key",
    )
