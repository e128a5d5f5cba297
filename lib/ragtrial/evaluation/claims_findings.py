"""Notebook 08's findings: the figures its prose states that no other saved table holds (the corpus
and questions it asked, the exclusions summed over conditions, the settings it quotes and the paper's
agreement figures it compares with). The comparisons and the judge agreement are worded from their
own tables (`condition_summary`, `pairwise_tests`, `judge_agreement`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from ragtrial.config.claims import ClaimsSettings
from ragtrial.evaluation.findings import Finding, claim_alpha_finding, embedded_model_finding
from ragtrial.evaluation.run_findings import answer_length_findings, interval_level_finding

PAPER = "Edge et al. 2024, Section 5.2"
# The paper's judge: the share of question pairs whose majority was not a tie, and the claim-based
# winner's agreement with it there (a range where the paper gives one), per measure.
PAPER_NON_TIE_SHARE = {"comprehensiveness": 0.33, "diversity": 0.39}
PAPER_AGREEMENT = {"comprehensiveness": (0.78, 0.78), "diversity": (0.69, 0.70)}


def question_findings(
    dataset_name: str,
    n_documents: int,
    report_levels: Sequence[int],  # the level of each community report
    questions: pd.DataFrame,
    question_failures: pd.DataFrame,
    fell_back: bool,
) -> list[Finding]:
    """What notebook 08 asks: the corpus (subject: the data set's name), its community reports (one
    row per level), the questions, the failures of generating them and whether the data set's own
    questions stood in (1) or not (0).
    """
    return [
        Finding("documents", "documents in the data set", n_documents, "data set", subject=dataset_name),
        Finding("community_reports", "community reports in the index", len(report_levels), "index"),
        *[
            Finding(
                "report_level", "a level of the index's community reports", level, "index", subject=str(level)
            )
            for level in sorted(set(report_levels))
        ],
        Finding("questions", "questions asked", len(questions), "questions"),
        Finding("question_failures", "question-generation failures", len(question_failures), "failures"),
        Finding(
            "dataset_questions_stood_in",
            "persona generation gave none (1) or not (0)",
            float(fell_back),
            "questions",
        ),
    ]


def claims_findings(
    counts: pd.DataFrame, settings: ClaimsSettings, judge_ties: bool | None, embedded: bool
) -> list[Finding]:
    """The closing figures of notebook 08 beside its tables: the answers' length limits, the answers
    excluded, at the claim cap and in all (summed over conditions, from `extraction_counts`), the claim
    cap, whether the verdicts' judge could call a tie (1, 0; NaN: not known, verdicts read from a
    file), the paper's figures, the intervals' level and whether the embedded default answered.
    """
    counted = "extraction_counts"
    return [
        *answer_length_findings(settings),
        Finding(
            "excluded_answers",
            "answers excluded (failed answer or extraction)",
            int(counts["failed_answer"].sum() + counts["failed_extraction"].sum()),
            counted,
        ),
        Finding("answers", "answers over all conditions", int(counts["answers"].sum()), counted),
        Finding(
            "answers_at_cap", "answers whose claims reached the cap", int(counts["at_cap"].sum()), counted
        ),
        Finding(
            "max_claims",
            "the claim cap (NaN: none)",
            math.nan if settings.max_claims is None else settings.max_claims,
            "run.json",
        ),
        Finding(
            "judge_ties",
            "the verdicts' judge could call a tie (1) or not (0); NaN: not known",
            math.nan if judge_ties is None else float(judge_ties),
            "run.json",
        ),
        *[
            Finding(
                "paper_non_tie_share", "the paper's share of non-tie judge majorities", share, PAPER, measure
            )
            for measure, share in PAPER_NON_TIE_SHARE.items()
        ],
        *[
            Finding(
                "paper_agreement",
                "the paper's claim-based agreement with the judge on its non-tie pairs",
                (low + high) / 2,
                PAPER,
                measure,
                ci_low=low,
                ci_high=high,
            )
            for measure, (low, high) in PAPER_AGREEMENT.items()
        ],
        interval_level_finding(),
        claim_alpha_finding(),
        embedded_model_finding(embedded),
    ]
