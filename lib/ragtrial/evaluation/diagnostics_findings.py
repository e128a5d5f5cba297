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


# Why a method's context is not filtered by a question's window, by what it is built from
# (`methods.registry.METHODS`' family).
UNFILTERED_BECAUSE = {
    "community_reports": "community reports summarise relations of every date, so none can be dropped "
    "by a window",
    "passages": "passages are never filtered",
    "none": "it shows no context",
    "gold": "its context is the gold subgraph",
    "graph": "its retrieval applied no window (the filter is off, or every question fell back)",
    "both": "its graph part applied no window",
}


def unfiltered_reason(method: str) -> str:
    """Why `method`'s retrieval applied no time window (a method the kit does not build: not its filter)."""
    from ragtrial.methods.registry import METHODS  # lazy: the findings need no method built

    if method not in METHODS:
        return "it is not a kit method, so the kit's window filter never ran"
    return UNFILTERED_BECAUSE[METHODS.entry(method).metadata["family"]]


def filter_findings(method: str, dropped: pd.Series) -> list[Finding]:
    """Whether `method`'s retrieval applied the window (`dropped`: per answer the count it dropped,
    <NA> where it applied none): the answers it was applied to, what it dropped, and when never
    applied, why (the figure).
    """
    applied = dropped.dropna()
    found = [
        Finding(
            "window_applied", "answers whose retrieval applied the window", len(applied), "temporal", method
        ),
        Finding(
            "time_filtered", "relations and claims the window dropped", int(applied.sum()), "temporal", method
        ),
    ]
    if applied.empty:
        found.append(
            Finding("window_not_applied", unfiltered_reason(method), len(dropped), "temporal", method)
        )
    return found


def temporal_findings(temporal: pd.DataFrame, time_filter: bool) -> list[Finding]:
    """Per method, whether its retrieval filtered by the question's window (`filter_findings`),
    whether the answer and the retrieved subgraph respect the questions' time windows, and how many
    wrong-time answers came with out-of-window context.
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
        found += filter_findings(method, group["time_filtered"])
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
