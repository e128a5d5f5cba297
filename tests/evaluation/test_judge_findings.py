"""The judge notebooks' findings: the figures their prose states, computed from small tables, and the
narratives wording them from saved tables alone.
"""

from __future__ import annotations

import pandas as pd
import pytest
from traceable import untraced_numbers

from ragtrial.config.judge import JudgeSettings
from ragtrial.evaluation.findings import Finding, embedded_model_finding, findings_table, stated
from ragtrial.evaluation.judge.findings import (
    alignment_findings,
    estimate_findings,
    judge_call_findings,
    length_findings,
    position_findings,
    trial_findings,
)
from ragtrial.evaluation.judge.pairs import ALIGNMENT_LOG_COLUMNS
from ragtrial.evaluation.run_findings import answer_length_findings
from ragtrial.report.narrative.judge import (
    EMBEDDED_NOTE,
    alignment_sentence,
    estimate_sentence,
    failed_answers_note,
    narrate_bias_audit,
)
from ragtrial.report.narrative.wording import answer_length_sentence


def value(findings: pd.DataFrame, statement: str, subject: str = "") -> float:
    return stated(findings, statement, subject)["value"]


def alignment_log() -> pd.DataFrame:
    """Three pairs: one aligned as generated, one by a regeneration, one discarded."""
    rows = [
        {"question_id": "q0", "regenerations": 0, "forced": False, "gap_before": 2, "gap_after": 2},
        {"question_id": "q1", "regenerations": 1, "forced": False, "gap_before": 30, "gap_after": 4},
        {"question_id": "q2", "regenerations": 2, "forced": True, "gap_before": 50, "gap_after": 40},
    ]
    pair = {"method_a": "rag", "replicate_a": 0, "method_b": "rag", "replicate_b": 1, "error": ""}
    statuses = ["aligned", "aligned", "discarded"]
    return pd.DataFrame(
        [r | pair | {"status": s} for r, s in zip(rows, statuses, strict=True)], columns=ALIGNMENT_LOG_COLUMNS
    )


def test_alignment_findings_count_outcomes_and_the_kept_pairs_gaps():
    findings = findings_table(alignment_findings(alignment_log(), tolerance=10))
    assert (value(findings, "alignment_pairs"), value(findings, "aligned_pairs")) == (3, 2)
    assert value(findings, "aligned_share") == pytest.approx(2 / 3)
    assert value(findings, "alignment_outcome", "aligned by regeneration") == 1
    assert value(findings, "alignment_outcome", "discarded") == 1
    assert value(findings, "aligned_gap_before") == 16 and value(findings, "aligned_gap_after") == 3
    assert alignment_sentence(findings) == (
        "**Length alignment** (tolerance 10 words) kept 2 of 3 pairs (67%; the paper aligns about 85%): "
        "1 aligned as generated, 1 aligned by regeneration, 0 aligned by forced append, 1 discarded, "
        "0 not alignable (imported or upstream answer), 0 failed. The mean word gap of the kept pairs went "
        "from 16.0 to 3.0."
    )
    assert (
        alignment_findings(alignment_log().iloc[:0], 10) == [] and alignment_sentence(findings.iloc[:0]) == ""
    )


def test_the_longer_answers_win_rate_weights_each_gap_bin_by_its_verdicts():
    bins = pd.DataFrame(
        {"gap_bin": ["[0, 5)", "[5, 10)"], "verdicts": [2, 6], "ties": [1, 3], "longer_win_rate": [1.0, 0.5]}
    )
    findings = findings_table(length_findings(bins))
    assert value(findings, "length_verdicts") == 8 and value(findings, "length_ties") == 4
    assert value(findings, "longer_win_rate") == pytest.approx((2 * 1.0 + 6 * 0.5) / 8)  # not (1.0 + 0.5) / 2
    assert length_findings(bins.iloc[:0]) == []


def test_position_and_trial_findings_state_the_difference_and_the_spread():
    audit = pd.DataFrame(
        {
            "pair": "rag #0 vs #1",
            "protocol": ["classic", "classic"],
            "order": ["AB", "BA"],
            "a_win_rate": [0.75, 0.25],
            "first_shown_win_rate": [0.75, 0.75],
            "tie_rate": 0.0,
        }
    )
    assert (
        value(findings_table(position_findings(audit)), "position_difference", "rag #0 vs #1, classic") == 0.5
    )
    trials = pd.DataFrame({"trial": range(5), "relative_win_rate": [-0.4, -0.1, 0.0, 0.2, 0.3]})
    findings = findings_table(trial_findings(trials))
    assert (
        value(findings, "trials"),
        value(findings, "trial_rwr_min"),
        value(findings, "trial_rwr_max"),
    ) == (
        5,
        -0.4,
        0.3,
    )
    assert value(findings, "trial_rwr_median") == 0.0


def test_judge_calls_count_failures_by_kind_and_the_unbiased_judgments_left_out():
    key = {"method_a": "a", "replicate_a": 0, "method_b": "b", "replicate_b": 0, "trial": 0}
    failures = pd.DataFrame(
        [
            key | {"question_id": "q0", "position": "AB", "stage": "judge_unbiased", "kind": "parse"},
            key | {"question_id": "q0", "position": "BA", "stage": "judge_unbiased", "kind": "parse"},
            key | {"question_id": "q1", "position": "AB", "stage": "judge_classic", "kind": "timeout"},
        ]
    )
    findings = findings_table(judge_call_findings(failures, pd.DataFrame(index=range(12))))
    assert (value(findings, "judge_calls"), value(findings, "judge_failures")) == (12, 3)
    assert value(findings, "judge_failure_kind", "parse") == 2
    assert value(findings, "excluded_judgments") == 1  # q0's two calls are one (question, trial)


def test_the_estimate_and_answer_length_sentences_read_the_same_from_findings():
    estimate = pd.DataFrame(
        {
            "calls": [3, 9],
            "prompt_tokens": [1200, 4000],
            "completion_tokens_max": [300, 432],
            "seconds_est": [60, 30],
        }
    )
    assert estimate_sentence(findings_table(estimate_findings(estimate))) == (
        "This run makes at most **12 model calls**, about 5,200 prompt tokens (cl100k) and at most 732 "
        "completion tokens; on the embedded model that is at most about 1.5 minutes (less where the response "
        "cache already holds a call)."
    )
    cfg = JudgeSettings()
    findings = findings_table(answer_length_findings(cfg))
    assert answer_length_sentence(findings) == (
        "**Answer length**: the answer prompt `summarize_query@v1` asks for at most about 80 words; replies "
        "stop at 96 tokens. Seed 000's methods answered without a length limit (about 200 tokens); this cap "
        "narrows the length differences its headline rests on."
    )
    assert value(findings, "answer_length_rule", "summarize_query@v1") == 80
    assert value(findings, "answer_max_tokens") == cfg.answer_max_tokens == 96


def test_the_failed_answers_note_states_the_saved_count_and_is_empty_without_failures():
    def note(failed: int) -> str:
        return failed_answers_note(
            findings_table([Finding("missing_answers", "failed answers", failed, "answer_failures")])
        )

    assert note(0) == ""
    assert note(3).startswith("3 answer(s) failed") and "not judged" in note(3)


def test_notebook_06s_narrative_words_its_saved_tables_alone():
    sanity = pd.DataFrame(
        [
            dict(pair="rag #0 vs #1", protocol="unbiased", questions=4, relative_win_rate=0.0, ci_low=-0.5,
                 ci_high=0.5, win_rate=0.25, tie_rate=0.5, loss_rate=0.25, p_holm=1.0, verdict="**no claim**",
                 supported=False, detectable_difference=0.7147, detection_power=0.8, detection_alpha=0.05),
        ]
    )  # fmt: skip
    bins = pd.DataFrame(
        {"gap_bin": ["[0, 5)", "[5, 10)"], "verdicts": [2, 6], "ties": [1, 3], "longer_win_rate": [1.0, 0.5]}
    )
    findings = findings_table(
        [
            *length_findings(bins),
            *alignment_findings(alignment_log(), 10),
            *(
                Finding(
                    "rubric_wording",
                    "1 when the paper's wording",
                    float(a == "directness"),
                    "prompt",
                    subject=a,
                )
                for a in ("relevance", "directness")
            ),
            embedded_model_finding(True),
        ]
    )
    tables = {
        "sanity_check": sanity,
        "position_bias": pd.DataFrame(
            columns=["pair", "protocol", "order", "a_win_rate", "first_shown_win_rate"]
        ),
        "findings": findings,
    }
    narration = narrate_bias_audit(tables)
    assert (
        "by token gap, as the paper measures length bias, on the classic protocol's verdicts with position"
        in (narration.findings)
    )
    assert (
        "over 8 verdicts with a winner (4 ties left out), the longer answer won 62% (about 50% without"
        in (narration.findings)
    )
    assert "kept 2 of 3 pairs (67%" in narration.findings and narration.findings.endswith(EMBEDDED_NOTE)
    assert "directness is the paper's wording; relevance is the kit's own wording" in narration.findings
    assert narration.headline.startswith("Self-vs-self (rag #0 vs #1, unbiased protocol, 4 questions)")
    assert "on 4 questions it detects a relative win rate of ±0.71 with 80% power at the 0.05 level" in (
        narration.headline
    )
    assert untraced_numbers(narration.headline, tables) == []
    with pytest.raises(KeyError, match="no findings table"):
        narrate_bias_audit({k: v for k, v in tables.items() if k != "findings"})
