"""Notebook 09's narrative: the seed-004 principle, reported by question category (never only the
aggregate) and retrieval before prompts: what the index never extracted, which methods fall under
the thresholds per category, where the context is islands, how the failures divide, and which
numbers depend on the model.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ragtrial.report.markdown import escape_markdown
from ragtrial.report.narrative.common import embedded_disclaimer

METRIC_NAMES = {
    "entity_recall": "entity recall",
    "relationship_recall": "relationship recall",
    "grounding": "answer grounding",
    "citation_coverage": "citation coverage",
    "answer_correct": "answer correctness",
}


def _listing(rows: pd.DataFrame) -> str:
    return ", ".join(f"{r.method} {r.mean:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}]" for r in rows.itertuples())


def indexing_sentences(linking: pd.DataFrame) -> list[str]:
    """Per category, the gold entities and edges the index never extracted (no retrieval can return them)."""
    out = []
    for r in linking.itertuples(index=False):
        if r.gold and r.indexed < r.gold:
            what, name = ("entities" if r.kind == "entity" else "edges"), escape_markdown(r.category)
            out.append(
                f"**{name}**: {r.gold - r.indexed} of {r.gold} gold {what} are not in the index "
                f"(linking rate {r.linking_rate:.2f}): an indexing failure no retrieval can repair; fix "
                "ingestion first."
            )
    return out


def threshold_sentences(summary: pd.DataFrame) -> list[str]:
    """Per category and metric, the methods whose mean is under the seed's starting threshold."""
    out = []
    for (category, metric), group in summary.groupby(["category", "metric"], sort=False):
        below = group[group["below_threshold"]]
        if not below.empty:
            name, threshold = escape_markdown(category), below["threshold"].iloc[0]
            out.append(
                f"**{name}**, {METRIC_NAMES.get(metric, metric)} under {threshold:.2f}: {_listing(below)}."
            )
    return out


def island_sentences(summary: pd.DataFrame) -> list[str]:
    """Methods with entity recall at its threshold but relationship recall under it: islands of context."""
    wide = summary.pivot_table(
        index=["category", "method"], columns="metric", values=["mean", "threshold"], sort=False
    )
    out = []
    for (category, method), row in wide.iterrows():
        entity, relation = row.get(("mean", "entity_recall")), row.get(("mean", "relationship_recall"))
        if pd.notna(entity) and pd.notna(relation):
            if (
                entity >= row[("threshold", "entity_recall")]
                and relation < row[("threshold", "relationship_recall")]
            ):
                out.append(
                    f"**{escape_markdown(category)}**, {method}: entity recall {entity:.2f} but relationship "
                    f"recall {relation:.2f}: islands of context (nodes without their edges)."
                )
    return out


def attribution_sentences(shares: pd.DataFrame) -> list[str]:
    """Per method and category, how the attributed answers divide, and the seed's advice."""
    out = []
    for (method, category), group in shares.groupby(["method", "category"], sort=False):
        attributed = int(group["attributed"].iloc[0])
        unattributed = int(group["unattributed"].iloc[0])
        name = escape_markdown(category)
        if not attributed:
            out.append(
                f"{method} on **{name}**: no answer could be attributed ({unattributed} unattributed)."
            )
            continue
        parts = ", ".join(f"{r.outcome} {r.answers}" for r in group.itertuples() if r.answers)
        extra = f"; {unattributed} unattributed" if unattributed else ""
        out.append(f"{method} on **{name}** ({attributed} answers): {parts}{extra}.")
    failures = shares[shares["outcome"] != "correct"].groupby("outcome")["answers"].sum()
    if failures.sum():
        top = failures.idxmax()
        advice = (
            "fix retrieval (ingestion, traversal depth, query expansion) before tuning prompts"
            if top in ("retrieval failure", "missed retrieval failure")
            else "the context was right and the answer still wrong: the prompt or the model is at fault"
        )
        out.append(
            f"Across methods the most common failure is the {top} ({failures[top]} answers): {advice}."
        )
    return out


def _share(flags: pd.Series) -> str:
    """`k of n` over the determined values of a True / False / None column, with the undetermined."""
    determined = flags.dropna()
    text = f"{int(determined.astype(bool).sum())} of {len(determined)}"
    return text + (f" ({len(flags) - len(determined)} undetermined)" if len(determined) < len(flags) else "")


def temporal_sentences(temporal: pd.DataFrame, time_filter: bool) -> list[str]:
    """Per method, whether the retrieved subgraph and the answer respect the questions' time windows,
    and how often a wrong answer came with out-of-window context (the seed: temporal errors most
    often originate in retrieval).
    """
    if temporal.empty:
        return ["No question has a time window."]
    out = [
        f"Retrieval {'filters' if time_filter else 'does not filter'} relations by the question's window "
        "(`retrieval.time_filter`)."
    ]
    for method, group in temporal.groupby("method", sort=False):
        violated = group[group["answer_respects"].eq(False)]
        from_retrieval = int(violated["subgraph_respects"].eq(False).sum())
        out.append(
            f"{method}: answer in the window {_share(group['answer_respects'])}; retrieved dated "
            f"relations all in the window {_share(group['subgraph_respects'])}"
            + (
                f"; {from_retrieval} of {len(violated)} wrong-time answers had out-of-window context"
                if len(violated)
                else ""
            )
            + "."
        )
    return out


def contradiction_sentences(contradictions: pd.DataFrame) -> list[str]:
    """Per method, how answers to conflicting sources were handled; a silent pick is the seed's failure."""
    if contradictions.empty:
        return ["No question has conflicting sources."]
    out = []
    for method, group in contradictions.groupby("method", sort=False):
        counts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in group["handling"].value_counts().items())
        picks = int(group["failure"].sum())
        out.append(
            f"{method}: {counts}" + (f" ({picks} silent picks: the seed's failure)." if picks else ".")
        )
    return out


def model_dependence_note(model_retrieval: Sequence[str], methods: Sequence[str], embedded: bool) -> str:
    """Which numbers are findings independent of the model, and which depend on it."""
    free = [m for m in methods if m not in model_retrieval]
    lines = [
        "Entity and relationship recall and the linking rates are measured without a model call"
        + (f" for {', '.join(free)}" if free else "")
        + (
            f"; for {', '.join(model_retrieval)} the context itself came through model calls (map steps, "
            "routing or question-entity listing), so their recall depends on the model"
            if model_retrieval
            else ""
        )
        + ". Citation coverage is counted without a model, on the references the model chose to write. "
        "Answer correctness, grounding and the attribution's gold-context step depend on the model's answers."
    ]
    if embedded:
        lines.append(embedded_disclaimer("Answers, correctness, grounding, citations and the attribution"))
    return " ".join(lines)


def diagnostics_findings(
    summary: pd.DataFrame,
    shares: pd.DataFrame,
    linking: pd.DataFrame,
    temporal: pd.DataFrame,
    contradictions: pd.DataFrame,
    time_filter: bool,
    model_retrieval: Sequence[str],
    embedded: bool,
) -> str:
    """The report's findings, by category: indexing, thresholds, islands, attribution, temporal
    correctness, contradiction handling, model dependence.
    """
    sections = [
        (
            "Indexing (before retrieval)",
            indexing_sentences(linking) or ["Every gold entity and edge links to the index."],
        ),
        (
            "Under the seed's starting thresholds",
            threshold_sentences(summary) or ["No method is under a threshold."],
        ),
        (
            "Islands of context",
            island_sentences(summary) or ["No method fetches the entities without their edges."],
        ),
        ("Failure attribution", attribution_sentences(shares) or ["No answer could be attributed."]),
        ("Temporal correctness", temporal_sentences(temporal, time_filter)),
        ("Contradiction handling", contradiction_sentences(contradictions)),
    ]
    body = "\n\n".join(f"**{title}.**\n\n" + "\n".join(f"- {s}" for s in lines) for title, lines in sections)
    return (
        "Reported per question category, never only the aggregate (the seed's principle); thresholds are "
        "the seed's starting points, to calibrate on your own data.\n\n"
        + body
        + "\n\n"
        + model_dependence_note(model_retrieval, list(dict.fromkeys(summary["method"])), embedded)
    )


def diagnostics_headline(summary: pd.DataFrame, shares: pd.DataFrame) -> str:
    """The one line of notebook 09 for the index page: how many measured means are under the seed's
    thresholds, and the most common failure of the attributed answers.
    """
    measured = summary.dropna(subset=["mean", "threshold"])
    line = (
        f"{int(measured['below_threshold'].sum())} of {len(measured)} measured (method, category, metric) "
        "means are under the seed's starting thresholds"
    )
    attributed = int(shares.drop_duplicates(["method", "category"])["attributed"].sum()) if len(shares) else 0
    failures = shares[shares["outcome"] != "correct"].groupby("outcome")["answers"].sum()
    if failures.sum():
        line += (
            f"; the most common failure is the {failures.idxmax()} ({failures.max()} of {attributed} "
            "attributed answers)"
        )
    elif attributed:
        line += f"; all {attributed} attributed answers are correct"
    return line + "."
