"""What notebooks 02 and 03 say of the question tables: how the generators' questions spread over
the corpus's entities, and how relevant what a method retrieves is to them; worded from their saved
tables (`findings`: `evaluation.question_findings`).
"""

from __future__ import annotations

import pandas as pd

from ragtrial.evaluation.findings import FINDINGS_TABLE, answered_by_embedded_model, stated_count, statements
from ragtrial.evaluation.question_findings import (
    AT_LENGTH_CAP,
    COMMUNITY_LEVEL,
    CONTEXT_TOKENS,
    ENTITY_FAILURES,
    EXACT_DUPLICATES,
    GENERATION_FAILURES,
    LENGTH_CAP,
    NEAR_DUPLICATES,
    OVER_LENGTH_CAP,
    PAPER_QUESTIONS,
    QUESTIONS_GENERATED,
    QUESTIONS_KEPT,
    RATING_FAILURES,
    RETRIEVED_ITEMS,
)
from ragtrial.evaluation.run_facts import QUOTED_NAMES_TABLE, quoted_name
from ragtrial.llm.structured import TOO_LONG
from ragtrial.report.markdown import escape_markdown
from ragtrial.report.narrative.common import embedded_disclaimer, failure_sentence
from ragtrial.report.narrative.narration import Narration, SavedTables, saved


def _distribution_line(row: pd.Series, community_level: int) -> str:
    if row["mentions"] == 0:
        return f"- **{row['generator']}** ({row['linker']}): no entity found in {row['questions']} questions."
    top_entity = escape_markdown(row["top_entity"])  # a name the model may have written
    return (
        f"- **{row['generator']}** ({row['linker']}): {row['questions']} questions, "
        f"{row['distinct_entities']} distinct entities ({row['distinct_linked_entities']} of them in the "
        f"graph; {row['linked_share']:.0%} of mentions link to it); the most frequent, *{top_entity}*, "
        f"is named in {row['top_question_share']:.0%} of the questions ({row['top_share']:.0%} of "
        f"mentions); entropy {row['entropy_bits']:.2f} bits; reaches {row['entity_coverage']:.1%} of the "
        f"graph's entities and {row['community_coverage']:.0%} of its level-{community_level} communities."
    )


def length_cap_note(findings: pd.DataFrame) -> str:
    """What the question length cap (questions.question_max_chars) cost: generation calls whose reply
    ran over it (failures of kind too_long) and kept questions that reached it (perhaps cut short).
    """
    if statements(findings, LENGTH_CAP).empty:
        return "Questions have no length cap (questions.question_max_chars is None)."
    max_chars, over, at_cap = (
        stated_count(findings, s) for s in (LENGTH_CAP, OVER_LENGTH_CAP, AT_LENGTH_CAP)
    )
    if not over and not at_cap:
        return f"No reply reached the {max_chars}-character length cap (questions.question_max_chars)."
    return (
        f"Length cap of {max_chars} characters (questions.question_max_chars): {over} generation call(s) "
        f"failed on a reply over it (kind {TOO_LONG}, table generation_failures) and {at_cap} kept "
        "question(s) reached it, so a constrained decoder may have cut them short (column at_length_cap)."
    )


def duplicates_note(findings: pd.DataFrame) -> str:
    """What de-duplication dropped per generator before the shares, beside the paper's question count
    (which states no de-duplication).
    """
    parts = []
    for g in statements(findings, QUESTIONS_GENERATED)["subject"]:
        generated, exact, near, kept = (
            stated_count(findings, s, g)
            for s in (QUESTIONS_GENERATED, EXACT_DUPLICATES, NEAR_DUPLICATES, QUESTIONS_KEPT)
        )
        parts.append(
            f"{g} {generated} generated, {exact} exact and {near} near duplicates dropped, {kept} kept"
        )
    return (
        "Before any share, de-duplication dropped repeats within each generator (table duplicates): "
        + "; ".join(parts)
        + f". The paper counts {stated_count(findings, PAPER_QUESTIONS)} questions per generator and states "
        "no de-duplication."
    )


def questions_shown_note(findings: pd.DataFrame) -> str:
    """The line above notebook 02's sample of questions."""
    return (
        f"At most two questions per generator and level, of {stated_count(findings, QUESTIONS_KEPT)} "
        "(table questions):"
    )


def _entity_distribution_findings(tables: SavedTables) -> str:
    findings, distribution = saved(tables, FINDINGS_TABLE), saved(tables, "entity_distribution")
    community_level = stated_count(findings, COMMUNITY_LEVEL)
    lines = [_distribution_line(row, community_level) for _, row in distribution.iterrows()]
    sizes = statements(findings, QUESTIONS_KEPT).query("subject != ''")
    counted = ", ".join(f"{n:.0f} {g}" for g, n in zip(sizes["subject"], sizes["value"], strict=True))
    dataset_name = quoted_name(saved(tables, QUOTED_NAMES_TABLE), "data set")
    notes = [
        f"These counts come from {counted} questions on *{dataset_name}*; distinct-entity counts grow "
        f"with the number of questions, so compare them with the paper's "
        f"({stated_count(findings, PAPER_QUESTIONS)} questions per generator) only as shares and "
        "entropy, not as raw counts.",
        duplicates_note(findings),
    ]
    if answered_by_embedded_model(findings):
        notes.append(
            embedded_disclaimer("The questions and the LLM linker's entity lists")
            + " The n-gram linker needs no model call but finds only entities of the graph, so it "
            "favours graph-grounded questions; read its counts beside the LLM linker's, not instead."
        )
    counts = {
        "generation calls": stated_count(findings, GENERATION_FAILURES),
        "entity listings": stated_count(findings, ENTITY_FAILURES),
    }
    notes.append(
        failure_sentence(
            {what: str(n) for what, n in counts.items() if n},
            "Every generation call and entity listing succeeded.",
            "Calls that failed",
            "left out (tables generation_failures, entity_failures)",
        )
    )
    notes.append(length_cap_note(findings))
    return "\n".join(lines) + "\n\n" + " ".join(notes)


def _relevance_findings(tables: SavedTables) -> str:
    findings, by_generator = saved(tables, FINDINGS_TABLE), saved(tables, "relevance_by_generator")
    names = saved(tables, QUOTED_NAMES_TABLE)
    lines = [
        f"- **{r['generator']}**: mean relevance {r['mean']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}] "
        f"over {r['n']} rated questions; {r['share_0_1']:.0%} scored 0-1 "
        f"[{r['share_0_1_low']:.0%}, {r['share_0_1_high']:.0%}]."
        for _, r in by_generator.iterrows()
    ]
    lines += [f"- {verdict}" for verdict in saved(tables, "generator_comparison")["verdict"]]
    notes = [
        f"Retriever `{quoted_name(names, 'questions.relevance.retriever')}` (top "
        f"{stated_count(findings, RETRIEVED_ITEMS)}, {stated_count(findings, CONTEXT_TOKENS)} context "
        f"tokens) on *{quoted_name(names, 'data set')}*.",
        duplicates_note(findings),
    ]
    if answered_by_embedded_model(findings):
        notes.append(
            embedded_disclaimer("Questions and ratings") + " They say nothing of how relevant retrieval is."
        )
    failed = stated_count(findings, RATING_FAILURES)
    notes.append(
        failure_sentence(
            {"questions": str(failed)} if failed else {},
            "Every question was rated.",
            "Questions without a rating (retrieval or rating failed)",
            "left out of every mean (table rating_failures)",
        )
    )
    notes.append(length_cap_note(findings))
    return "\n".join(lines) + "\n\n" + " ".join(notes)


# What each linker counts, as the headline states it: the n-gram linker finds graph entity names in the
# question, so it favours graph-grounded questions; the model's lists count every entity it names.
LINKER_COUNTS = {
    "llm": "entities the model listed, each counted whether the graph holds it or not",
    "ngram": (
        "the n-gram linker: graph entity names found in the questions, a count that favours the "
        "graph-grounded questions; `questions.llm_entities` gives the unbiased count"
    ),
}


def entity_distribution_headline(distribution: pd.DataFrame, embedded: bool) -> str:
    """The one line of notebook 02 for the index page: per generator, by the unbiased counter (the
    model's entity lists when the run made them, else the n-gram linker, named with its bias), the
    distinct entities its questions name and how concentrated they are. On the embedded model the
    model's lists are a pipeline check, and the headline says so.
    """
    if distribution.empty:
        return "No question was generated, so there is no entity distribution."
    linker = "llm" if (distribution["linker"] == "llm").any() else distribution["linker"].iloc[0]
    rows = distribution[distribution["linker"] == linker]
    counter = LINKER_COUNTS.get(linker, f"the {linker} linker")
    check = "*Pipeline check on the embedded model, not a finding:* " if embedded and linker == "llm" else ""
    return (
        f"{check}Distinct entities the questions name ({counter}; share of questions naming the most "
        "frequent one): "
        + ", ".join(
            f"{r['generator']} {r['distinct_entities']} ({r['top_question_share']:.0%})"
            if r["mentions"]
            else f"{r['generator']} none"
            for _, r in rows.iterrows()
        )
        + "."
    )


def relevance_headline(by_generator: pd.DataFrame) -> str:
    """The one line of notebook 03 for the index page: each generator's mean relevance rating."""
    if by_generator.empty:
        return "No question was rated, so there is no relevance to report."
    return (
        "Mean relevance (0-5) of the retrieved context per generator: "
        + ", ".join(
            f"{r['generator']} {r['mean']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
            for _, r in by_generator.iterrows()
        )
        + "."
    )


def narrate_entity_distribution(tables: SavedTables) -> Narration:
    """Notebook 02: per generator and linker, the entity distribution, and the notes on the counts."""
    return Narration(
        entity_distribution_headline(
            saved(tables, "entity_distribution"), answered_by_embedded_model(saved(tables, FINDINGS_TABLE))
        ),
        _entity_distribution_findings(tables),
    )


def narrate_relevance(tables: SavedTables) -> Narration:
    """Notebook 03: per generator, the mean relevance and the share of 0-1 ratings, the generators
    compared, and the notes on the ratings.
    """
    return Narration(relevance_headline(saved(tables, "relevance_by_generator")), _relevance_findings(tables))
