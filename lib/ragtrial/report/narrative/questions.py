"""What notebooks 02 and 03 say of the question tables: how the generators' questions spread over
the corpus's entities, and how relevant what a method retrieves is to them.
"""

from __future__ import annotations

import pandas as pd

from ragtrial.config.questions import RelevanceSettings
from ragtrial.llm.structured import TOO_LONG
from ragtrial.report.markdown import escape_markdown
from ragtrial.report.narrative.common import embedded_disclaimer, failure_sentence


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


def length_cap_note(questions: pd.DataFrame, generation_failures: pd.DataFrame, max_chars: int | None) -> str:
    """What the question length cap (questions.question_max_chars) cost: generation calls whose reply
    ran over it (failures of kind too_long) and kept questions that reached it (perhaps cut short).
    """
    if max_chars is None:
        return "Questions have no length cap (questions.question_max_chars is None)."
    over = int((generation_failures["kind"] == TOO_LONG).sum()) if len(generation_failures) else 0
    at_cap = int(questions["at_length_cap"].sum()) if len(questions) else 0
    if not over and not at_cap:
        return f"No reply reached the {max_chars}-character length cap (questions.question_max_chars)."
    return (
        f"Length cap of {max_chars} characters (questions.question_max_chars): {over} generation call(s) "
        f"failed on a reply over it (kind {TOO_LONG}, table generation_failures) and {at_cap} kept "
        "question(s) reached it, so a constrained decoder may have cut them short (column at_length_cap)."
    )


def entity_distribution_findings(
    distribution: pd.DataFrame,
    questions: pd.DataFrame,
    dataset_name: str,
    community_level: int,
    generation_failures: pd.DataFrame,
    entity_failures: pd.DataFrame,
    embedded: bool,
    question_max_chars: int | None,
) -> str:
    lines = [_distribution_line(row, community_level) for _, row in distribution.iterrows()]
    sizes = questions.groupby("generator").size()
    notes = [
        f"These counts come from {', '.join(f'{n} {g}' for g, n in sizes.items())} questions on "
        f"*{dataset_name}*; distinct-entity counts grow with the number of questions, so compare them "
        "with the paper's (150 questions per generator) only as shares and entropy, not as raw counts."
    ]
    if embedded:
        notes.append(
            embedded_disclaimer("The questions and the LLM linker's entity lists")
            + " The n-gram linker (no model call) is the trustworthy reading of which entities the "
            "questions name."
        )
    counts = {"generation calls": len(generation_failures), "entity listings": len(entity_failures)}
    notes.append(
        failure_sentence(
            {what: str(n) for what, n in counts.items() if n},
            "Every generation call and entity listing succeeded.",
            "Calls that failed",
            "left out (tables generation_failures, entity_failures)",
        )
    )
    notes.append(length_cap_note(questions, generation_failures, question_max_chars))
    return "\n".join(lines) + "\n\n" + " ".join(notes)


def relevance_findings(
    by_generator: pd.DataFrame,
    comparison: pd.DataFrame,
    relevance: RelevanceSettings,
    dataset_name: str,
    failures: pd.DataFrame,
    embedded: bool,
    length_cap: str,
) -> str:
    """Notebook 03's findings; `length_cap` is `length_cap_note` of the rated questions."""
    lines = [
        f"- **{r['generator']}**: mean relevance {r['mean']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}] "
        f"over {r['n']} rated questions; {r['share_0_1']:.0%} scored 0-1 "
        f"[{r['share_0_1_low']:.0%}, {r['share_0_1_high']:.0%}]."
        for _, r in by_generator.iterrows()
    ]
    lines += [f"- {verdict}" for verdict in comparison["verdict"]]
    notes = [
        f"Retriever `{relevance.retriever}` (top {relevance.k}, {relevance.context_max_tokens} context "
        f"tokens) on *{dataset_name}*."
    ]
    if embedded:
        notes.append(
            embedded_disclaimer("Questions and ratings") + " They say nothing of how relevant retrieval is."
        )
    notes.append(
        failure_sentence(
            {"questions": str(len(failures))} if len(failures) else {},
            "Every question was rated.",
            "Questions without a rating (retrieval or rating failed)",
            "left out of every mean (table rating_failures)",
        )
    )
    notes.append(length_cap)
    return "\n".join(lines) + "\n\n" + " ".join(notes)


def entity_distribution_headline(distribution: pd.DataFrame) -> str:
    """The one line of notebook 02 for the index page: per generator, by the first linker (the n-gram
    one, no model call), the distinct entities its questions name and how concentrated they are.
    """
    if distribution.empty:
        return "No question was generated, so there is no entity distribution."
    linker = distribution["linker"].iloc[0]
    rows = distribution[distribution["linker"] == linker]
    return (
        f"Distinct entities the questions name ({linker} linker; share of questions naming the most "
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
