"""Notebook 09's findings: every figure its narrative states that no cell of its saved tables holds,
computed from those tables (gold items the index never extracted, means under the seed's thresholds,
islands of context, the most common failure, temporal and contradiction counts per method, which
methods' context came through model calls). `report.narrative.diagnostics` words them.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ragtrial.evaluation.findings import Finding, embedded_model_finding, findings_table


def pair_subject(first: str, second: str) -> str:
    """The `subject` of a finding about two things at once, e.g. a category and a method."""
    return f"{first} / {second}"


def indexing_findings(linking: pd.DataFrame) -> list[Finding]:
    """Per category and kind, the gold entities or edges the index never extracted (when any)."""
    return [
        Finding(
            "not_indexed",
            f"gold {r.kind} items not in the index",
            r.gold - r.indexed,
            "linking_rates",
            subject=pair_subject(r.category, r.kind),
        )
        for r in linking.itertuples(index=False)
        if r.gold and r.indexed < r.gold
    ]


def island_findings(summary: pd.DataFrame) -> list[Finding]:
    """Per category and method: entity recall at its threshold but relationship recall under it
    (islands of context); the value is the relationship recall.
    """
    wide = summary.pivot_table(
        index=["category", "method"], columns="metric", values=["mean", "threshold"], sort=False
    )
    found = []
    for (category, method), row in wide.iterrows():
        entity, relation = row.get(("mean", "entity_recall")), row.get(("mean", "relationship_recall"))
        if pd.notna(entity) and pd.notna(relation):
            if (
                entity >= row[("threshold", "entity_recall")]
                and relation < row[("threshold", "relationship_recall")]
            ):
                found.append(
                    Finding(
                        "island",
                        "relationship recall under its threshold while entity recall is at its",
                        relation,
                        "diagnostics_summary",
                        subject=pair_subject(category, method),
                    )
                )
    return found


def attribution_findings(summary: pd.DataFrame, shares: pd.DataFrame) -> list[Finding]:
    """How many measured means are under the thresholds, how many answers were attributed, and the
    most common failure across methods (when any answer failed).
    """
    measured = summary.dropna(subset=["mean", "threshold"])
    attributed = int(shares.drop_duplicates(["method", "category"])["attributed"].sum()) if len(shares) else 0
    found = [
        Finding(
            "measured_means",
            "(method, category, metric) means with a threshold",
            len(measured),
            "diagnostics_summary",
        ),
        Finding(
            "means_below_threshold",
            "measured means under the seed's starting threshold",
            int(measured["below_threshold"].sum()),
            "diagnostics_summary",
        ),
        Finding("attributed_answers", "answers attributed across methods", attributed, "attribution_shares"),
    ]
    failures = shares[shares["outcome"] != "correct"].groupby("outcome")["answers"].sum()
    if failures.sum():
        top = failures.idxmax()
        found.append(
            Finding(
                "most_common_failure",
                "attributed answers with the most common failure, across methods",
                int(failures[top]),
                "attribution_shares",
                subject=top,
            )
        )
    return found


def _window_findings(method: str, flags: pd.Series, what: str) -> list[Finding]:
    """`k of n` over the determined values of a True / False / None column, and the undetermined."""
    determined = flags.dropna()
    return [
        Finding(
            f"{what}_in_window",
            f"{what}s in the time window",
            int(determined.astype(bool).sum()),
            "temporal",
            method,
        ),
        Finding(
            f"{what}_window_determined",
            f"{what}s whose window could be checked",
            len(determined),
            "temporal",
            method,
        ),
        Finding(
            f"{what}_window_undetermined",
            f"{what}s whose window could not be checked",
            len(flags) - len(determined),
            "temporal",
            method,
        ),
    ]


def temporal_findings(temporal: pd.DataFrame, time_filter: bool) -> list[Finding]:
    """Per method, whether the answer and the retrieved subgraph respect the questions' time windows,
    and how many wrong-time answers came with out-of-window context.
    """
    found = [
        Finding(
            "time_filter",
            "1 when retrieval filters relations by the question's window",
            float(time_filter),
            "run.json",
        )
    ]
    for method, group in temporal.groupby("method", sort=False):
        violated = group[group["answer_respects"].eq(False)]
        found += _window_findings(method, group["answer_respects"], "answer")
        found += _window_findings(method, group["subgraph_respects"], "subgraph")
        found += [
            Finding(
                "wrong_time_answers",
                "answers naming a value outside the window",
                len(violated),
                "temporal",
                method,
            ),
            Finding(
                "wrong_time_from_retrieval",
                "wrong-time answers whose context was out of the window",
                int(violated["subgraph_respects"].eq(False).sum()),
                "temporal",
                method,
            ),
        ]
    return found


def contradiction_findings(contradictions: pd.DataFrame) -> list[Finding]:
    """Per method, how many answers to conflicting sources were handled each way (the `figure` names
    the handling), most frequent first, and how many silently picked one value (the seed's failure).
    """
    found = []
    for method, group in contradictions.groupby("method", sort=False):
        found += [
            Finding(
                "contradiction_handling", handling.replace("_", " "), int(count), "contradictions", method
            )
            for handling, count in group["handling"].value_counts().items()
        ]
        found.append(
            Finding(
                "silent_picks",
                "answers that silently picked one value",
                int(group["failure"].sum()),
                "contradictions",
                method,
            )
        )
    return found


def diagnostics_findings(
    summary: pd.DataFrame,
    shares: pd.DataFrame,
    linking: pd.DataFrame,
    temporal: pd.DataFrame,
    contradictions: pd.DataFrame,
    time_filter: bool,
    model_retrieval: Sequence[str],
    embedded: bool,
) -> pd.DataFrame:
    """The `findings` table of notebook 09. `model_retrieval`: the methods whose context came through
    model calls (`diagnostics.model_retrieval_methods`, from the ledger).
    """
    found = (
        indexing_findings(linking)
        + island_findings(summary)
        + attribution_findings(summary, shares)
        + temporal_findings(temporal, time_filter)
        + contradiction_findings(contradictions)
    )
    found += [
        Finding(
            "model_retrieval",
            "1 when the method's context came through model calls, else 0",
            float(method in model_retrieval),
            "ledger",
            method,
        )
        for method in dict.fromkeys(summary["method"])
    ]
    found.append(embedded_model_finding(embedded))
    return findings_table(found)
