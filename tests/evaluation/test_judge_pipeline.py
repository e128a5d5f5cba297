"""The judge pipeline (answers -> pairs -> length alignment -> classic and unbiased judges -> summaries)
against the scripted endpoint: what each design sends, what it counts, and that its cost plan is the
run's own.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import make_llm
from test_judge import first_position_judge, words

from ragtrial.config.judge import JudgeSettings
from ragtrial.config.systems import UpstreamComparisonSettings
from ragtrial.evaluation.judge.answers import AnswerSet
from ragtrial.evaluation.judge.cost_plan import estimate_cost, mean_question_tokens
from ragtrial.evaluation.judge.pairs import NOT_ALIGNABLE, CannotRegenerate
from ragtrial.evaluation.judge.pipeline import (
    comparison_design,
    judge_cost_estimate,
    planned_judge_calls,
    run_judge_pipeline,
    self_check_design,
    unbiased_design,
)

QUESTIONS = pd.DataFrame(
    {
        "question_id": ["q0", "q1", "q2"],
        "question": ["Question 0?", "Question 1?", "Question 2?"],
        "question_type": ["single_hop", "multi_hop", "single_hop"],
    }
)
CFG = JudgeSettings(trials=2, repeats=1, tolerance_words=5, max_regenerations=1, bootstrap_resamples=200)


def answer_set(texts: dict[tuple[str, str, int], str], regenerate=None) -> AnswerSet:
    """Answers as `answer_questions` frames them: an empty text is a failed answer."""
    rows = [
        {
            "question_id": q,
            "method": method,
            "replicate": replicate,
            "text": text,
            "failure": "" if text else "answer: http_500",
            "failures": [] if text else [{"stage": "answer", "kind": "http_500", "detail": "scripted"}],
        }
        for (q, method, replicate), text in texts.items()
    ]
    return AnswerSet(pd.DataFrame(rows), regenerate or (lambda q, m, r, n: pytest.fail("no regeneration")))


def stages(llm) -> dict[str, int]:
    return llm.ledger.frame()["stage"].value_counts().to_dict()


def test_the_self_check_judges_two_runs_in_both_orders_and_counts_every_call(scripted, tmp_path):
    scripted.default_reply = first_position_judge
    llm = make_llm(scripted.base_url, tmp_path)
    design = self_check_design(CFG)
    runs = {0: "fact", 1: "data"}  # the two runs' answers differ, at one length
    texts = {(q, "naive_rag", r): words(20, w) for q in QUESTIONS["question_id"] for r, w in runs.items()}
    answers = answer_set(texts)
    run = run_judge_pipeline(llm, CFG, design, QUESTIONS, answers)
    # 3 pairs: classic 2 orders x 1 repeat, unbiased 2 trials x 1 repeat x 2 orders; no alignment needed
    assert len(scripted.chat_requests()) == 3 * 2 + 3 * 2 * 2
    assert stages(llm) == {"judge_classic": 6, "judge_unbiased": 12}
    assert set(zip(run.pairs["replicate_a"], run.pairs["replicate_b"], strict=True)) == {(0, 1)}
    assert len(run.costs) == 18 and not run.costs["failed"].any() and run.judge_failures.empty
    assert run.costs["calls"].sum() == 18
    assert list(run.alignment["aligned as generated"]) == [3]
    # the first-shown judge: the classic protocol's A wins when shown first, the unbiased one ties
    overall = run.classic_summary[run.classic_summary["aspect"] == "overall"].set_index("position")
    assert overall.loc["AB", "win_rate_a"] == 1.0 and overall.loc["BA", "win_rate_a"] == 0.0
    assert run.unbiased_result.summary["tie_rate"].iloc[0] == 1.0


def test_a_failed_answer_leaves_its_pairs_out_and_the_classic_protocol_can_run_alone(scripted, tmp_path):
    scripted.default_reply = first_position_judge
    llm = make_llm(scripted.base_url, tmp_path)
    cfg = CFG.model_copy(update={"methods": ["naive_rag", "hybrid", "local_search"], "unbiased": False})
    design = comparison_design(cfg, ["naive_rag", "hybrid"])  # local_search did not run
    assert design.method_pairs == (("naive_rag", "hybrid"),) and design.classic_positions == ("AB",)
    texts = {(q, m, 0): words(20) for q in QUESTIONS["question_id"] for m in ("naive_rag", "hybrid")}
    texts[("q1", "hybrid", 0)] = ""
    run = run_judge_pipeline(llm, cfg, design, QUESTIONS, answer_set(texts))
    assert list(run.missing.itertuples(index=False)) == [("q1", "hybrid", 0)]
    assert list(run.pairs["question_id"]) == ["q0", "q2"]
    assert list(run.answer_failures["question_id"]) == ["q1"]
    # no alignment and no unbiased judge: the classic protocol alone, once per pair
    assert stages(llm) == {"judge_classic": 2} and len(scripted.chat_requests()) == 2
    assert run.alignment_log.empty and run.unbiased.judgments.empty and len(run.costs) == 2


def test_the_unbiased_design_aligns_only_what_it_can_regenerate_and_counts_failed_calls(scripted, tmp_path):
    def judge(body):  # q2's unbiased calls never parse
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        return "no JSON here" if "Question 2?" in user else first_position_judge(body)

    scripted.default_reply = judge
    llm = make_llm(scripted.base_url, tmp_path)
    cfg = UpstreamComparisonSettings(
        methods=["graphrag_local", "local_search"], pairs=[("graphrag_local", "local_search")], trials=1
    )
    regenerated = []

    def regenerate(question_id, method, replicate, target_words):
        if method == "graphrag_local":
            raise CannotRegenerate("an upstream system's answer")
        regenerated.append((question_id, method, target_words))
        return words(target_words)

    texts = {(q, "graphrag_local", 0): words(30) for q in QUESTIONS["question_id"]}
    texts |= {(q, "local_search", 0): words(30) for q in QUESTIONS["question_id"]}
    texts[("q0", "graphrag_local", 0)] = words(10)  # the upstream side is the shorter one
    texts[("q1", "local_search", 0)] = words(10)  # the kit's side is
    design = unbiased_design(cfg, ["graphrag_local", "local_search"])
    run = run_judge_pipeline(llm, cfg, design, QUESTIONS, answer_set(texts, regenerate))
    assert run.classic is None and design.classic_positions == ()
    with pytest.raises(ValueError, match="no classic order"):
        _ = run.classic_summary
    # q0: the kit's side would have to shrink to the upstream length; it is regenerated to it
    assert sorted(regenerated) == [("q0", "local_search", 10), ("q1", "local_search", 30)]
    assert list(run.alignment_log["status"]) == ["aligned", "aligned", "aligned"]
    # q2's two unbiased calls failed: counted, left out, never scored; the costs count them too
    assert len(run.judge_failures) == 2 and set(run.judge_failures["question_id"]) == {"q2"}
    assert len(run.costs) == 3 * 2 and run.costs["failed"].sum() == 2
    assert set(run.unbiased.judgments["question_id"]) == {"q0", "q1"}
    assert run.unbiased_result.summary["excluded"].iloc[0] == 1


def test_a_fixed_answer_that_stays_apart_is_not_alignable(scripted, tmp_path):
    scripted.default_reply = first_position_judge
    llm = make_llm(scripted.base_url, tmp_path)
    cfg = UpstreamComparisonSettings(
        methods=["graphrag_local", "local_search"], pairs=[("graphrag_local", "local_search")], trials=1
    )

    def regenerate(question_id, method, replicate, target_words):
        raise CannotRegenerate("imported")

    texts = {("q0", "graphrag_local", 0): words(10), ("q0", "local_search", 0): words(40)}
    design = unbiased_design(cfg, ["graphrag_local", "local_search"])
    run = run_judge_pipeline(llm, cfg, design, QUESTIONS.iloc[:1], answer_set(texts, regenerate))
    assert list(run.alignment_log["status"]) == [NOT_ALIGNABLE] and run.aligned.empty
    assert scripted.chat_requests() == [] and run.costs.empty  # nothing aligned: nothing judged


def test_the_plan_counts_the_calls_the_pipeline_makes(scripted, tmp_path):
    scripted.default_reply = first_position_judge
    llm = make_llm(scripted.base_url, tmp_path)
    cfg = CFG.model_copy(update={"classic_positions": ["AB", "BA"], "classic_repeats": 2})
    design = comparison_design(cfg, ["naive_rag", "hybrid"])
    texts = {(q, m, 0): words(20) for q in QUESTIONS["question_id"] for m in ("naive_rag", "hybrid")}
    run_judge_pipeline(llm, cfg, design, QUESTIONS, answer_set(texts))
    plans = {p.stage: p for p in planned_judge_calls(cfg, design, len(QUESTIONS), ["naive_rag"])}
    made = stages(llm)
    assert plans["judge_classic"].calls == made["judge_classic"] == 3 * 2 * 2
    assert plans["judge_unbiased"].calls == made["judge_unbiased"] == 3 * 2 * 2
    assert plans["answer"].calls == 3  # hybrid's answers are counted as another's (not the kit's)
    # the notebook's estimate table is estimate_cost at the design's sizes
    table = judge_cost_estimate(cfg, design, list(QUESTIONS["question"]))
    expected = estimate_cost(
        cfg,
        3,
        1,
        n_answers=6,
        question_tokens=mean_question_tokens(list(QUESTIONS["question"])),
        answer_tokens=cfg.answer_max_tokens,
        answer_prompt_tokens=cfg.context_budget + 100,
        classic_positions=2,
    )
    pd.testing.assert_frame_equal(table, expected)
