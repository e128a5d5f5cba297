"""Settings of the verdict (notebook 10): which runs it combines, what a query and a quality point are
worth, the amortization points, the baseline rule and the power analysis.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragtrial.config.base import Names
from ragtrial.config.methods import FamilyWiseLevel, MethodName, Resampling
from ragtrial.config.notebooks import verdict_inputs

# The notebooks whose result tables the verdict reads, in the order of the flow (their registry
# entries say `verdict_input`).
INPUT_NOTEBOOKS = verdict_inputs()
# Non-graph methods from most to least retrieval machinery: the strongest present is the baseline.
BASELINE_ORDER = ("hybrid", "naive_rag", "bm25", "ts_rank", "ts", "closed_book")
# The measure the verdict sentence states first, in this order of preference.
PRIMARY_MEASURES = (
    "qa_accuracy",
    "judge_score",
    "claims_comprehensiveness",
    "key_fact_correctness",
    "summary_rouge2",
    "qa_recall_at_k",
    "entity_recall",
)
InputNotebook = Literal[INPUT_NOTEBOOKS]  # type: ignore[valid-type]  # values read from the notebook registry
Probability = Annotated[float, Field(gt=0, lt=1)]
MeasureName = Annotated[str, Names("measure")]


class VerdictSettings(Resampling, FamilyWiseLevel):
    """Notebook 10 (ragtrial.evaluation.verdict): per question type, each graph method against the
    strongest non-graph baseline, with paired intervals, Holm-adjusted tests, the cost per query
    including the amortized index build, break-even and power.
    """

    runs: list[str] = Field(
        [],
        description="run ids to combine (one per notebook), or run labels: a grid point's label picks "
        "that run, a label several runs of one notebook share (a grid entry's) gives the verdict per point; "
        "empty: this batch's runs of the input notebooks (a grid's read point by point), else the latest "
        "completed run of each for the same data set, model and index",
    )
    notebooks: list[InputNotebook] = Field(
        list(INPUT_NOTEBOOKS), description="the notebooks whose result tables the verdict reads"
    )
    queries: list[Annotated[int, Field(ge=1)]] = Field(
        [1_000, 100_000],
        min_length=1,
        description="query counts the index build is amortized over (the evaluation's own question count "
        "is always added as one more point)",
    )
    cost_unit: Literal["auto", "money", "tokens", "seconds"] = Field(
        "auto",
        description="the unit of break-even and cost ratios: money (needs llm.price_prompt_per_mtok and "
        "llm.price_completion_per_mtok), tokens (LLM prompt + completion), seconds (wall time of the build, "
        "model time of the answers); auto = money when the LLM is priced, else tokens",
    )
    quality_value: dict[str, Annotated[float, Field(gt=0)]] = Field(
        {},
        description="measure -> what a difference of 1.0 on it is worth per query, in cost_unit (on a 0/1 "
        "measure, the value of one more correct answer); without one, break-even is stated as the cost per "
        "extra unit of quality",
    )
    target_difference: dict[str, Annotated[float, Field(gt=0)]] = Field(
        {},
        description="measure -> the difference the power analysis asks a question count for (the measure's "
        "own default when not listed: 0.1 on 0-1 scales, 0.5 on the judge's 0-5 scale, 1 claim)",
    )
    baseline_order: list[MethodName] = Field(
        list(BASELINE_ORDER),
        min_length=1,
        description="non-graph methods in order of preference: the first a run answered with is the "
        "baseline (a rule stated before the results, never chosen by looking at them)",
    )
    primary_measures: list[MeasureName] = Field(
        list(PRIMARY_MEASURES),
        min_length=1,
        description="measures in order of preference: the verdict sentence leads with the first one "
        "measured for a question type",
    )
    power: Probability = Field(0.8, description="the power the detectable difference is computed at")
    seed: int = Field(0, ge=0, description="bootstrap seed")
