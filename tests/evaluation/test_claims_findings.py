"""Notebook 08's findings (`evaluation.claims_findings`) sum the exclusions over conditions and carry
the settings and paper figures its prose quotes; its narrative words the saved tables alone, and
every number it states is a cell of them.
"""

from __future__ import annotations

import pandas as pd
from traceable import untraced_numbers

from ragtrial.config.claims import ClaimsSettings
from ragtrial.evaluation.claims_findings import claims_findings, question_findings
from ragtrial.evaluation.findings import findings_table, stated
from ragtrial.report.narrative.claims import narrate, questions_note

COUNTS = pd.DataFrame(
    {
        "method": ["global_search_c0", "naive_rag"],
        "answers": [4, 4],
        "extracted": [3, 4],
        "no_claims": [0, 1],
        "declined": [0, 1],
        "at_cap": [2, 1],
        "failed_answer": [1, 0],
        "failed_extraction": [0, 0],
    }
)
SUMMARY = pd.DataFrame(
    {
        "measure": ["comprehensiveness", "comprehensiveness", "diversity@0.5"],
        "metric": ["comprehensiveness", "comprehensiveness", "diversity"],
        "threshold": [None, None, 0.5],
        "method": ["global_search_c0", "naive_rag", "naive_rag"],
        "n": [3, 4, 4],
        "mean": [5.25, 3.5, 2.0],
        "ci_low": [4.5, 2.75, 1.5],
        "ci_high": [6.0, 4.25, 2.5],
    }
)
TESTS = pd.DataFrame(
    [{"measure": "comprehensiveness", "method_a": "global_search_c0", "method_b": "naive_rag", "n_shared": 3,
      "mean_diff": 1.75, "ci_low": 0.5, "ci_high": 3.0, "p_value": 0.004, "p_holm": 0.012, "reject": True}]
)  # fmt: skip
AGREEMENT = pd.DataFrame(
    [{"measure": "diversity@0.5", "metric": "diversity", "judged": 4, "non_tie": 2, "non_tie_share": 0.5,
      "compared": 2, "agree": 1, "claim_ties": 1, "agreement": 0.5, "ci_low": 0.0, "ci_high": 1.0}]
)  # fmt: skip


def _findings(judge_ties=True, max_claims=6, embedded=False):
    settings = ClaimsSettings(max_claims=max_claims)
    return findings_table(claims_findings(COUNTS, settings, judge_ties, embedded))


def test_the_findings_sum_the_exclusions_and_carry_the_settings_quoted():
    findings = _findings()
    assert stated(findings, "excluded_answers").value == 1
    assert stated(findings, "answers").value == 8
    assert stated(findings, "answers_at_cap").value == 3
    assert stated(findings, "max_claims").value == 6
    assert stated(findings, "judge_ties").value == 1
    assert stated(findings, "answer_max_tokens").value == 96
    assert stated(findings, "answer_length_rule", "summarize_query@v1").value == 80
    assert stated(findings, "paper_agreement", "diversity")[["ci_low", "ci_high"]].tolist() == [0.69, 0.70]
    assert stated(_findings(judge_ties=None, max_claims=None), "max_claims").isna()["value"]


def test_the_narrative_words_the_saved_tables_alone():
    tables = {
        "condition_summary": SUMMARY,
        "pairwise_tests": TESTS,
        "judge_agreement": AGREEMENT,
        "extraction_counts": COUNTS,
        "findings": _findings(),
    }
    narration = narrate(tables)
    assert narration.headline == (
        "Claims per answer: global_search_c0 5.25 [4.50, 6.00], naive_rag 3.50 [2.75, 4.25]; "
        "supported differences: global_search_c0 more than naive_rag."
    )
    lines = narration.findings.split("\n")
    assert lines[0] == (
        "- **Answer length**: the answer prompt `summarize_query@v1` asks for at most about 80 words; "
        "replies stop at 96 tokens. Seed 000's methods answered without a length limit (about 200 tokens); "
        "this cap narrows the length differences its headline rests on."
    )
    assert lines[1] == "- global_search_c0: 5.25 claims per answer [4.50, 6.00] over 3 answers."
    assert "+1.75 [+0.50, +3.00] per answer over 3 shared questions" in lines[3]
    assert (
        "agreed 1 times (50%, 95% interval [0%, 100%]" in lines[4]
        and "Paper: 69-70% on 39% non-tie" in lines[4]
    )
    assert "means what the paper's 33% / 39% mean" in lines[5]
    assert lines[6].startswith("- 1 of 8 answers were excluded") and "naive_rag 1;" in lines[6]
    assert lines[6].endswith("3 reached the claim cap of 6, so their counts are lower bounds.")
    assert untraced_numbers(narration.headline + "\n" + narration.findings, tables) == []
    unknown = narrate(tables | {"findings": _findings(judge_ties=None, max_claims=None, embedded=True)})
    assert "Verdicts were read from a file" in unknown.findings and "claim cap of None" in unknown.findings
    assert "Gemma 3 270M" in unknown.findings.split("\n")[-1]


def test_the_questions_note_words_the_corpus_and_the_questions_asked():
    questions = pd.DataFrame({"question_id": ["q1", "q2"], "question_type": ["persona", "persona"]})
    failures = pd.DataFrame({"item_id": ["p1"]})
    asked = findings_table(question_findings("podcast", 12, [0, 0, 1], questions, failures, fell_back=True))
    assert questions_note(questions, asked) == (
        "Data set **podcast**: 12 documents, index with 3 community reports at levels [0, 1]. 2 question(s) "
        "(persona); 1 question-generation failure(s). **Persona generation produced no question** (its "
        "failures are listed at the end), so the data set's own questions are used instead."
    )
