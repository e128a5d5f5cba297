"""The narrative rules every report shares: one claim rule, one failure sentence, one disclaimer."""

from __future__ import annotations

import pandas as pd

from ragtrial.evaluation.findings import findings_table
from ragtrial.evaluation.judge.findings import judge_call_findings
from ragtrial.report.markdown import model_markdown
from ragtrial.report.narrative.common import (
    answer_failure_sentence,
    embedded_disclaimer,
    failure_sentence,
    paired_sentences,
)
from ragtrial.report.narrative.index_build import index_findings
from ragtrial.report.narrative.judge import EMBEDDED_NOTE, judge_failure_sentence
from ragtrial.runner.context import EMBEDDED_WARNING
from ragtrial.stats import NO_CLAIM, Interval, McNemarResult, claim_supported, claim_text


def test_a_claim_needs_an_interval_off_zero_and_an_adjusted_test_that_rejects():
    assert claim_text(0.1, 0.3, 0.01, "better") == "better"
    assert claim_text(-0.3, -0.1, 0.049, "worse") == "worse"
    assert claim_text(-0.1, 0.3, 0.001, "better") == NO_CLAIM
    assert claim_text(float("nan"), float("nan"), 0.001, "better") == NO_CLAIM
    assert "adjusted test does not reject (p = 0.05" in claim_text(0.1, 0.3, 0.05, "better")
    assert "no test could be run" in claim_text(0.1, 0.3, float("nan"), "better")
    assert not claim_supported(0.1, 0.3, float("nan")) and claim_supported(0.1, 0.3, 0.2, alpha=0.25)


def test_paired_sentences_apply_the_claim_rule():
    row = dict(method="graph", baseline="rag", metric="f1", mean_diff=0.2, n=9, wins=5, losses=1)
    row |= dict(test="Wilcoxon", p_value=0.04, p_holm=0.04)
    supported, unsupported = paired_sentences(
        pd.DataFrame([row | {"ci_low": 0.1, "ci_high": 0.3}, row | {"ci_low": -0.1, "ci_high": 0.3}])
    )
    assert supported.endswith("graph did better than rag on these questions.")
    assert unsupported.endswith(f"{NO_CLAIM}.")


def test_one_failure_sentence_shape_for_answers_and_judge_calls():
    summary = pd.DataFrame({"method": ["a", "b"], "failures": [0, 2], "questions": [4, 4]})
    assert answer_failure_sentence(summary).startswith("Answers lost to model failures (b 2 of 4)")
    assert (
        answer_failure_sentence(summary.assign(failures=0))
        == "Every method produced an answer for every question."
    )
    call = {
        "question_id": "q",
        "trial": 0,
        "method_a": "a",
        "replicate_a": 0,
        "method_b": "b",
        "replicate_b": 0,
    }
    judge = pd.DataFrame([call | {"stage": "judge_unbiased", "kind": "parse"}])
    findings = findings_table(judge_call_findings(judge, pd.DataFrame(index=range(10))))
    assert judge_failure_sentence(findings).startswith(
        "1 of 10 judge calls failed after the repair round (parse 1)"
    )
    for sentence in (answer_failure_sentence(summary), judge_failure_sentence(findings)):
        assert sentence.endswith("each is listed in the failures table, none is scored.")
    assert failure_sentence({}, "nothing failed", "x", "y") == "nothing failed"


def test_every_embedded_note_carries_the_one_disclaimer():
    disclaimer = embedded_disclaimer("X").removeprefix("X")
    assert disclaimer in EMBEDDED_WARNING and disclaimer in EMBEDDED_NOTE


def test_index_findings_state_the_recall_difference_with_the_claim_rule():
    manifest = {"llm_extraction": None, "stages": [{"model_s": 3.0}], "build_wall_s": 10.0}
    test = McNemarResult(2, 0, 0.0, 0.5, "exact binomial")
    text = index_findings(manifest, pd.DataFrame(), None, (Interval(-0.5, -1.0, 0.0, 2), test))
    assert "LLM minus NLP relation recall is -50% [-100%, +0%] (McNemar exact binomial, p=0.5)" in text
    assert NO_CLAIM in text
    assert "No LLM graph was built." in text and "3 s of it waiting for the model" in text
    significant = McNemarResult(9, 0, 0.0, 0.004, "exact binomial")
    claimed = index_findings(manifest, pd.DataFrame(), None, (Interval(-0.5, -0.8, -0.2, 9), significant))
    assert "the NLP graph recalls more" in claimed


def test_model_headings_sit_below_the_report_headings():
    assert model_markdown("# Title\n## Part\ntext") == "#### Title\n##### Part\ntext"


def test_question_findings_use_the_shared_disclaimer_and_failure_sentence():
    from ragtrial.config.questions import RelevanceSettings
    from ragtrial.report.narrative.questions import relevance_findings

    by_generator = pd.DataFrame(
        [{"generator": "graph", "mean": 2.5, "ci_low": 2.0, "ci_high": 3.0, "n": 4, "share_0_1": 0.25,
          "share_0_1_low": 0.0, "share_0_1_high": 0.5}]
    )  # fmt: skip
    comparison = pd.DataFrame({"verdict": ["graph vs summary: no claim."]})
    text = relevance_findings(
        by_generator, comparison, RelevanceSettings(), "tiny", pd.DataFrame([{"x": 1}]), True, "Cap note."
    )
    assert "mean relevance 2.50 [2.00, 3.00] over 4 rated questions" in text
    assert embedded_disclaimer("Questions and ratings") in text
    assert "Questions without a rating (retrieval or rating failed) (questions 1)" in text
    assert text.endswith("Cap note.")
    clean = relevance_findings(
        by_generator, comparison, RelevanceSettings(), "tiny", pd.DataFrame(), False, "Cap note."
    )
    assert "Every question was rated." in clean and "Gemma" not in clean


def test_question_findings_count_replies_over_and_questions_at_the_length_cap():
    from ragtrial.report.narrative.questions import length_cap_note

    questions = pd.DataFrame({"question_id": ["q1", "q2"], "at_length_cap": [True, False]})
    failures = pd.DataFrame({"item_id": ["c1", "c2"], "kind": ["too_long", "parse"]})
    note = length_cap_note(questions, failures, 140)
    assert "1 generation call(s) failed on a reply over it (kind too_long" in note
    assert "1 kept question(s) reached it" in note
    assert "No reply reached the 140-character" in length_cap_note(questions.iloc[1:], failures.iloc[1:], 140)
    assert "no length cap" in length_cap_note(questions, pd.DataFrame(), None)
