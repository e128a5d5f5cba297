"""Notebook 09's narrative, worded from its saved tables alone (the diagnostics summary, linking
rates, attribution shares and its `findings` table, `evaluation.diagnostics_findings`): the seed-004
principle, reported by question category (never only the aggregate) and retrieval before prompts:
what the index never extracted, which methods fall under the thresholds per category, where the
context is islands, how the failures divide, and which numbers depend on the model.
"""

from __future__ import annotations

import pandas as pd

from ragtrial.evaluation.diagnostics_findings import pair_subject
from ragtrial.evaluation.findings import answered_by_embedded_model, stated, statements
from ragtrial.report.markdown import escape_markdown
from ragtrial.report.narrative.common import embedded_disclaimer
from ragtrial.report.narrative.narration import Narration, SavedTables, saved

METRIC_NAMES = {
    "entity_recall": "entity recall",
    "relationship_recall": "relationship recall",
    "grounding": "answer grounding",
    "citation_coverage": "citation coverage",
    "answer_correct": "answer correctness",
}


# How a community counts toward the retrieved subgraph (`evaluation.diagnostics.retrieved_elements`).
COMMUNITY_COUNTING = (
    "A community report or a global-search map point counts as retrieved only the entities its text names "
    "and its community's relations between two of them, never every member of the community."
)


def narrate(tables: SavedTables) -> Narration:
    summary, shares, findings = (
        saved(tables, "diagnostics_summary"),
        saved(tables, "attribution_shares"),
        saved(tables, "findings"),
    )
    return Narration(
        diagnostics_headline(findings),
        diagnostics_text(summary, shares, saved(tables, "linking_rates"), findings),
    )


def _listing(rows: pd.DataFrame) -> str:
    return ", ".join(f"{r.method} {r.mean:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}]" for r in rows.itertuples())


def _pairs(frame: pd.DataFrame, first: str, second: str) -> list[tuple[str, str]]:
    """The distinct (first, second) values of two columns, in the order they first appear."""
    return list(dict.fromkeys(zip(frame[first], frame[second], strict=True)))


def indexing_sentences(linking: pd.DataFrame, findings: pd.DataFrame) -> list[str]:
    """Per category, the gold entities and edges the index never extracted (no retrieval can return them)."""
    missing = statements(findings, "not_indexed").set_index("subject")["value"]
    out = []
    for r in linking.itertuples(index=False):
        subject = pair_subject(r.category, r.kind)
        if subject in missing:
            what, name = ("entities" if r.kind == "entity" else "edges"), escape_markdown(r.category)
            out.append(
                f"**{name}**: {int(missing[subject])} of {r.gold} gold {what} are not in the index "
                f"(linking rate {r.linking_rate:.2f}): an indexing failure no retrieval can repair; fix "
                "ingestion first."
            )
    return out


def threshold_sentences(summary: pd.DataFrame) -> list[str]:
    """Per category and metric, the methods whose mean is under the seed's starting threshold."""
    out = []
    for category, metric in _pairs(summary, "category", "metric"):
        rows = summary[(summary["category"] == category) & (summary["metric"] == metric)]
        below = rows[rows["below_threshold"]]
        if not below.empty:
            name, threshold = escape_markdown(category), below["threshold"].iloc[0]
            out.append(
                f"**{name}**, {METRIC_NAMES.get(metric, metric)} under {threshold:.2f}: {_listing(below)}."
            )
    return out


def island_sentences(summary: pd.DataFrame, findings: pd.DataFrame) -> list[str]:
    """Methods with entity recall at its threshold but relationship recall under it: islands of context."""
    islands = set(statements(findings, "island")["subject"])
    means = summary.set_index(["category", "method", "metric"])["mean"]
    return [
        f"**{escape_markdown(category)}**, {method}: entity recall "
        f"{means[(category, method, 'entity_recall')]:.2f} but relationship recall "
        f"{means[(category, method, 'relationship_recall')]:.2f}: islands of context (nodes without "
        "their edges)."
        for category, method in _pairs(summary, "category", "method")
        if pair_subject(category, method) in islands
    ]


def attribution_sentences(shares: pd.DataFrame, findings: pd.DataFrame) -> list[str]:
    """Per method and category, how the attributed answers divide, and the seed's advice."""
    out = []
    for method, category in _pairs(shares, "method", "category"):
        group = shares[(shares["method"] == method) & (shares["category"] == category)]
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
    top = statements(findings, "most_common_failure")
    if not top.empty:
        failure, answers = top["subject"].iloc[0], int(top["value"].iloc[0])
        advice = (
            "fix retrieval (ingestion, traversal depth, query expansion) before tuning prompts"
            if failure in ("retrieval failure", "missed retrieval failure")
            else "the context was right and the answer still wrong: the prompt or the model is at fault"
        )
        out.append(f"Across methods the most common failure is the {failure} ({answers} answers): {advice}.")
    return out


def _share(findings: pd.DataFrame, method: str, what: str) -> str:
    """`k of n` over the determined values, with the undetermined."""
    inside = int(stated(findings, f"{what}_in_window", method)["value"])
    determined = int(stated(findings, f"{what}_window_determined", method)["value"])
    undetermined = int(stated(findings, f"{what}_window_undetermined", method)["value"])
    return f"{inside} of {determined}" + (f" ({undetermined} undetermined)" if undetermined else "")


def temporal_sentences(findings: pd.DataFrame) -> list[str]:
    """Per method, whether the retrieved subgraph and the answer respect the questions' time windows,
    and how often a wrong answer came with out-of-window context (the seed: temporal errors most
    often originate in retrieval).
    """
    methods = list(statements(findings, "wrong_time_answers")["subject"])
    if not methods:
        return ["No question has a time window."]
    time_filter = stated(findings, "time_filter")["value"] == 1
    out = [
        "Retrieval filters relations by the question's window (`retrieval.time_filter`) where a method "
        "can be filtered; each method below says whether its retrieval was."
        if time_filter
        else "Retrieval does not filter relations by the question's window (`retrieval.time_filter` is off)."
    ]
    for method in methods:
        wrong = int(stated(findings, "wrong_time_answers", method)["value"])
        from_retrieval = int(stated(findings, "wrong_time_from_retrieval", method)["value"])
        out.append(
            f"{method}: "
            + (_filtered(findings, method) if time_filter else "")
            + f"answer in the window {_share(findings, method, 'answer')}; retrieved dated "
            f"relations all in the window {_share(findings, method, 'subgraph')}"
            + (f"; {from_retrieval} of {wrong} wrong-time answers had out-of-window context" if wrong else "")
            + "."
        )
    return out


def _filtered(findings: pd.DataFrame, method: str) -> str:
    """Whether `method`'s retrieval applied the window: in how many answers, what it dropped, or why not."""
    applied = int(stated(findings, "window_applied", method)["value"])
    if not applied:
        return f"not filtered by the window ({stated(findings, 'window_not_applied', method)['figure']}); "
    answers = sum(
        int(stated(findings, f"answer_window_{what}", method)["value"])
        for what in ("determined", "undetermined")
    )
    dropped = int(stated(findings, "time_filtered", method)["value"])
    return (
        f"filtered by the window in {applied} of {answers} answers ({dropped} relations and claims dropped); "
    )


def contradiction_sentences(findings: pd.DataFrame) -> list[str]:
    """Per method, how answers to conflicting sources were handled; a silent pick is the seed's failure."""
    picks = statements(findings, "silent_picks")
    if picks.empty:
        return ["No question has conflicting sources."]
    handled = statements(findings, "contradiction_handling")
    out = []
    for method, silent in zip(picks["subject"], picks["value"].astype(int), strict=True):
        rows = handled[handled["subject"] == method]
        counts = ", ".join(f"{r.figure} {int(r.value)}" for r in rows.itertuples())
        out.append(
            f"{method}: {counts}" + (f" ({silent} silent picks: the seed's failure)." if silent else ".")
        )
    return out


def model_dependence_note(findings: pd.DataFrame) -> str:
    """Which numbers are findings independent of the model, and which depend on it."""
    rows = statements(findings, "model_retrieval")
    free = list(rows.loc[rows["value"] == 0, "subject"])
    model_retrieval = list(rows.loc[rows["value"] == 1, "subject"])
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
    if answered_by_embedded_model(findings):
        lines.append(embedded_disclaimer("Answers, correctness, grounding, citations and the attribution"))
    return " ".join(lines)


def diagnostics_text(
    summary: pd.DataFrame, shares: pd.DataFrame, linking: pd.DataFrame, findings: pd.DataFrame
) -> str:
    """The report's findings, by category: indexing, thresholds, islands, attribution, temporal
    correctness, contradiction handling, model dependence.
    """
    sections = [
        (
            "Indexing (before retrieval)",
            indexing_sentences(linking, findings) or ["Every gold entity and edge links to the index."],
        ),
        (
            "Under the seed's starting thresholds",
            threshold_sentences(summary) or ["No method is under a threshold."],
        ),
        (
            "Islands of context",
            island_sentences(summary, findings) or ["No method fetches the entities without their edges."],
        ),
        (
            "Failure attribution",
            attribution_sentences(shares, findings) or ["No answer could be attributed."],
        ),
        ("Temporal correctness", temporal_sentences(findings)),
        ("Contradiction handling", contradiction_sentences(findings)),
    ]
    body = "\n\n".join(f"**{title}.**\n\n" + "\n".join(f"- {s}" for s in lines) for title, lines in sections)
    return (
        "Reported per question category, never only the aggregate (the seed's principle); thresholds are "
        "the seed's starting points, to calibrate on your own data. "
        + COMMUNITY_COUNTING
        + "\n\n"
        + body
        + "\n\n"
        + model_dependence_note(findings)
    )


def diagnostics_headline(findings: pd.DataFrame) -> str:
    """The one line of notebook 09 for the index page: how many measured means are under the seed's
    thresholds, and the most common failure of the attributed answers.
    """
    below = int(stated(findings, "means_below_threshold")["value"])
    measured = int(stated(findings, "measured_means")["value"])
    attributed = int(stated(findings, "attributed_answers")["value"])
    line = (
        f"{below} of {measured} measured (method, category, metric) means are under the seed's starting "
        "thresholds"
    )
    top = statements(findings, "most_common_failure")
    if not top.empty:
        line += (
            f"; the most common failure is the {top['subject'].iloc[0]} ({int(top['value'].iloc[0])} of "
            f"{attributed} attributed answers)"
        )
    elif attributed:
        line += f"; all {attributed} attributed answers are correct"
    return line + "."
