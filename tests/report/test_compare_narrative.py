"""Notebook 14's words (`report.narrative.compare`): a supported difference worded with its interval,
the flips counted and listed, every number traced to a saved table; fewer than two runs said so.
"""

from __future__ import annotations

import pandas as pd
from traceable import untraced_numbers

from ragtrial.evaluation.findings import findings_table
from ragtrial.evaluation.run_comparison import (
    comparison_findings,
    comparison_rows,
    flipped_questions,
    with_claims,
)
from ragtrial.report.narrative.compare import narrate
from ragtrial.runner.compared_runs import COST_COLUMNS, DIFFERENCE_COLUMNS, RUN_COLUMNS, no_comparison

BINARY = {"qa_accuracy": True}


def observed(values: list[int]) -> pd.DataFrame:
    n = len(values)
    return pd.DataFrame(
        {
            "measure": "qa_accuracy",
            "question_id": [f"q{i}" for i in range(n)],
            "question_type": "single_hop",
            "method": "hybrid",
            "partner": "",
            "value": values,
            "status": "ok",
        }
    )


def test_a_supported_difference_and_the_flips_are_worded_from_the_saved_tables():
    first, second = observed([0] * 30 + [1] * 10), observed([1] * 30 + [0] * 2 + [1] * 8)
    names = ("run-a", "run-b")
    comparisons = with_claims(comparison_rows(first, second, BINARY, names, n_resamples=500))
    flips = flipped_questions(first, second, BINARY, names)
    runs = pd.DataFrame(
        [dict.fromkeys(RUN_COLUMNS, "") | {"position": i + 1, "run_id": r} for i, r in enumerate(names)]
    )
    tables = {
        "compared_runs": runs,
        "settings_differences": pd.DataFrame(
            [["run-a", "run-b", "retrieval.hub_degree_cap", "null", "20"]], columns=DIFFERENCE_COLUMNS
        ),
        "run_comparisons": comparisons,
        "flipped_questions": flips,
        "cost_deltas": pd.DataFrame(
            [["run-a", "run-b", "prompt_tokens", 12000.0, 15500.0, 3500.0, ""]], columns=COST_COLUMNS
        ),
        "findings": findings_table(comparison_findings(2, comparisons, flips)),
    }
    narration = narrate(tables)
    text = narration.findings
    assert "`retrieval.hub_degree_cap` (`null` → `20`)" in text
    assert "Of 1 differences (measure x method), 1 are findings" in text
    assert "hybrid's qa_accuracy is higher in run-b than in run-a" in text and "+0.70" in text
    assert "Questions right → wrong: 2: `q30`" in text and "Questions wrong → right: 30:" in text
    assert "and more (table `flipped_questions`)" in text
    assert "prompt_tokens 12,000 → 15,500" in text
    assert (
        narration.headline == "1 run(s) against run-a: 1 of 1 differences are findings under the claim rule"
    )
    assert not untraced_numbers(text, tables) and not untraced_numbers(narration.headline, tables)


def test_fewer_than_two_runs_are_said_so():
    empty = no_comparison()
    tables = empty.tables() | {
        "findings": findings_table(comparison_findings(1, empty.comparisons, empty.flips))
    }
    assert narrate(tables).headline.startswith("Fewer than two runs to compare (1 found)")
