"""Notebooks 02 and 03's findings: the questions each generator kept, the duplicates dropped before the
shares (beside the paper's count), what the length cap cost, the failed calls, and the settings their
prose quotes. The per-generator distribution and relevance
figures are in their own tables (`entity_distribution`, `relevance_by_generator`).
"""

from __future__ import annotations

import pandas as pd

from ragtrial.config.questions import RelevanceSettings
from ragtrial.evaluation.findings import Finding, embedded_model_finding, findings_table
from ragtrial.evaluation.published_figures import read_published
from ragtrial.llm.structured import TOO_LONG

QUESTIONS_KEPT = "questions kept"  # subject "" for all, else a generator
LENGTH_CAP = "question length cap"  # no row: no cap
OVER_LENGTH_CAP = "replies over the length cap"
AT_LENGTH_CAP = "questions at the length cap"
COMMUNITY_LEVEL = "community level"
GENERATION_FAILURES = "failed generation calls"
ENTITY_FAILURES = "failed entity listings"
RATING_FAILURES = "questions without a rating"
RETRIEVED_ITEMS = "items retrieved per question"
CONTEXT_TOKENS = "rated context tokens"
# The GraphRAG evaluation paper's question count per generator, which 02 compares with (its value is in
# the data file `evaluation/published/question_counts.csv`, row PAPER_QUESTIONS).
PAPER_QUESTIONS = "questions per generator in the paper"
PUBLISHED_QUESTION_COUNTS = "question_counts.csv"
# Per generator, before the shares: the questions generated and the duplicates de-duplication dropped
# (the paper counts 150 per generator and states no de-duplication).
QUESTIONS_GENERATED = "questions generated"
EXACT_DUPLICATES = "exact duplicates dropped"
NEAR_DUPLICATES = "near duplicates dropped"


def generated_question_findings(
    questions: pd.DataFrame, generation_failures: pd.DataFrame, question_max_chars: int | None
) -> list[Finding]:
    """The questions kept, in all and per generator (in generator order), and what the length cap
    (questions.question_max_chars) cost: generation calls whose reply ran over it (failures of kind
    too_long) and kept questions that reached it (perhaps cut short).
    """
    sizes = questions.groupby("generator").size()
    findings = [Finding(QUESTIONS_KEPT, "questions kept after de-duplication", len(questions), "questions")]
    findings += [
        Finding(QUESTIONS_KEPT, "questions kept after de-duplication", int(n), "questions", subject=str(g))
        for g, n in sizes.items()
    ]
    if question_max_chars is not None:
        over = int((generation_failures["kind"] == TOO_LONG).sum()) if len(generation_failures) else 0
        at_cap = int(questions["at_length_cap"].sum()) if len(questions) else 0
        findings += [
            Finding(LENGTH_CAP, "characters (questions.question_max_chars)", question_max_chars, "run.json"),
            Finding(OVER_LENGTH_CAP, f"generation calls failed as {TOO_LONG}", over, "generation_failures"),
            Finding(AT_LENGTH_CAP, "kept questions that reached the cap", at_cap, "questions"),
        ]
    return findings


def duplicate_findings(questions: pd.DataFrame, duplicates: pd.DataFrame) -> list[Finding]:
    """Per generator (in generator order), what de-duplication did before any share is computed: the
    questions generated (kept plus dropped), the exact and the near duplicates dropped (`duplicates`,
    `deduplicate`'s dropped rows), beside the paper's count per generator.
    """
    kept = questions.groupby("generator", sort=False).size()
    kinds = ["exact", "near"]
    dropped = (
        duplicates.groupby(["generator", "kind"])
        .size()
        .unstack(fill_value=0)
        .reindex(columns=kinds, fill_value=0)
        if len(duplicates)
        else pd.DataFrame(columns=kinds, dtype=int)
    )
    generators = list(dict.fromkeys([*kept.index, *dropped.index]))
    rows = []
    for g in generators:
        exact, near = (int(dropped.at[g, k]) if g in dropped.index else 0 for k in kinds)
        rows += [
            Finding(
                QUESTIONS_GENERATED,
                "questions generated, before de-duplication",
                int(kept.get(g, 0)) + exact + near,
                "questions, duplicates",
                subject=str(g),
            ),
            Finding(EXACT_DUPLICATES, "equal after normalization", exact, "duplicates", subject=str(g)),
            Finding(
                NEAR_DUPLICATES,
                "embedding cosine above questions.dedup_threshold",
                near,
                "duplicates",
                subject=str(g),
            ),
        ]
    published = read_published(PUBLISHED_QUESTION_COUNTS).set_index("measure").loc[PAPER_QUESTIONS]
    return [
        *rows,
        Finding(
            PAPER_QUESTIONS,
            f"{published['paper']}, {published['section']}",
            int(published["published"]),
            f"evaluation/published/{PUBLISHED_QUESTION_COUNTS}",
        ),
    ]


def entity_distribution_findings(
    questions: pd.DataFrame,
    duplicates: pd.DataFrame,
    generation_failures: pd.DataFrame,
    entity_failures: pd.DataFrame,
    question_max_chars: int | None,
    community_level: int,
    embedded: bool,
) -> pd.DataFrame:
    """Notebook 02's `findings` table."""
    return findings_table(
        [
            *generated_question_findings(questions, generation_failures, question_max_chars),
            *duplicate_findings(questions, duplicates),
            Finding(
                COMMUNITY_LEVEL,
                "community level coverage counts (questions.community_level)",
                community_level,
                "run.json",
            ),  # fmt: skip
            Finding(
                GENERATION_FAILURES,
                "generation calls that failed",
                len(generation_failures),
                "generation_failures",
            ),  # fmt: skip
            Finding(ENTITY_FAILURES, "entity listings that failed", len(entity_failures), "entity_failures"),
            embedded_model_finding(embedded),
        ]
    )


def relevance_findings(
    questions: pd.DataFrame,
    duplicates: pd.DataFrame,
    generation_failures: pd.DataFrame,
    rating_failures: pd.DataFrame,
    question_max_chars: int | None,
    relevance: RelevanceSettings,
    embedded: bool,
) -> pd.DataFrame:
    """Notebook 03's `findings` table."""
    return findings_table(
        [
            *generated_question_findings(questions, generation_failures, question_max_chars),
            *duplicate_findings(questions, duplicates),
            Finding(RETRIEVED_ITEMS, "questions.relevance.k", relevance.k, "run.json"),
            Finding(
                CONTEXT_TOKENS,
                "questions.relevance.context_max_tokens",
                relevance.context_max_tokens,
                "run.json",
            ),  # fmt: skip
            Finding(
                RATING_FAILURES,
                "questions whose retrieval or rating failed",
                len(rating_failures),
                "rating_failures",
            ),  # fmt: skip
            embedded_model_finding(embedded),
        ]
    )
