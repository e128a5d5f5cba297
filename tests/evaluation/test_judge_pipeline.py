"""The judge pipeline (answers -> pairs -> length alignment -> classic and unbiased judges -> summaries)
against the scripted endpoint: what each design sends, what it counts, and that its cost plan is the
run's own.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import pandas as pd
import pytest
from conftest import batch_runs, make_llm
from scripted_server import InFlight
from test_judge import first_position_judge, shown_answers, words

from ragtrial.config.judge import JudgeSettings
from ragtrial.config.systems import UpstreamComparisonSettings
from ragtrial.evaluation.judge.answers import AnswerSet, answer_context, answer_questions
from ragtrial.evaluation.judge.cost_plan import estimate_cost, mean_question_tokens
from ragtrial.evaluation.judge.pairs import NOT_ALIGNABLE, CannotRegenerate
from ragtrial.evaluation.judge.pipeline import (
    TRIALS_AT_ONCE,
    comparison_design,
    judge_cost_estimate,
    planned_judge_calls,
    run_judge_pipeline,
    self_check_design,
    unbiased_design,
)
from ragtrial.questions.sampling import questions_frame

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


def schema_title(body: dict) -> str:
    return body.get("response_format", {}).get("schema", {}).get("title", "text")


def test_the_classic_protocol_runs_beside_the_first_unbiased_trial_with_the_same_tables(scripted, tmp_path):
    """They judge the same pairs independently: above concurrency 1 their calls are in flight
    together; at 1 every classic call goes first, as the stages were written.
    """
    cfg = CFG.model_copy(update={"methods": ["naive_rag", "hybrid"]})
    design = comparison_design(cfg, ["naive_rag", "hybrid"])
    texts = {(q, m, 0): words(20, m) for q in QUESTIONS["question_id"] for m in ("naive_rag", "hybrid")}
    runs = {}
    for concurrency in (1, 4):
        held = InFlight(first_position_judge, 0.1, schema_title)
        scripted.default_reply = held
        scripted.requests.clear()
        llm = make_llm(scripted.base_url, tmp_path / f"c{concurrency}", concurrency=concurrency)
        runs[concurrency] = run_judge_pipeline(llm, cfg, design, QUESTIONS, answer_set(texts))
        kinds = [schema_title(r["body"]) for r in scripted.chat_requests()]
        assert sorted(set(kinds)) == ["AspectScores", "ClassicVerdict"]
        if concurrency == 1:
            assert kinds == sorted(kinds, key=lambda kind: kind != "ClassicVerdict")  # classic first
            assert held.together == set()
        else:
            assert frozenset(("ClassicVerdict", "AspectScores")) in held.together
    for name in ("pairs", "classic_summary", "costs"):
        one, four = (getattr(runs[c], name).drop(columns=["latency_s"], errors="ignore") for c in (1, 4))
        pd.testing.assert_frame_equal(one, four, obj=name)
    one, four = (runs[c].unbiased.judgments for c in (1, 4))
    pd.testing.assert_frame_equal(one, four, obj="unbiased judgments")


def test_a_failed_answer_leaves_its_pairs_out_and_the_classic_protocol_can_run_alone(scripted, tmp_path):
    scripted.default_reply = first_position_judge
    llm = make_llm(scripted.base_url, tmp_path)
    cfg = CFG.model_copy(update={"methods": ["naive_rag", "hybrid", "local_search"], "unbiased": False})
    design = comparison_design(cfg, ["naive_rag", "hybrid"])  # local_search did not run
    assert design.method_pairs == (("naive_rag", "hybrid"),) and design.classic_positions == ("AB",)
    texts = {(q, m, 0): words(20) for q in QUESTIONS["question_id"] for m in ("naive_rag", "hybrid")}
    texts[("q1", "hybrid", 0)] = ""
    run = run_judge_pipeline(llm, cfg, design, QUESTIONS, answer_set(texts))
    assert list(run.missing.itertuples(index=False)) == [("q1", "hybrid", 0, 0)]  # (..., trial)
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


def test_two_pairs_asking_the_same_regeneration_count_it_alike_at_any_concurrency(scripted, tmp_path):
    # x's answer is shorter than y's and z's, which have one length: both pairs ask for x's answer at
    # 30 words, one request; the pair listed second replays it from the cache whatever the timing
    cfg = CFG.model_copy(update={"methods": ["x", "y", "z"], "trials": 1})
    design = comparison_design(cfg, ["x", "y", "z"])
    texts = {(q, m, 0): words(10 if m == "x" else 30, m) for q in QUESTIONS["question_id"] for m in "xyz"}
    logs = {}
    for concurrency in (1, 4):
        scripted.default_reply = InFlight(lambda body: words(30, "again"), 0.05, lambda body: "any")
        llm = make_llm(scripted.base_url, tmp_path / f"c{concurrency}", concurrency=concurrency)

        first_askers: set[str] = set()

        def regenerate(question_id, method, replicate, target_words, llm=llm, first_askers=first_askers):
            asked = f"{question_id}: {method}'s answer in {target_words} words"
            if asked not in first_askers:  # the first pair to ask is the slower to send it
                first_askers.add(asked)
                time.sleep(0.2)
            return llm.complete(asked, stage="answer", method=method).text

        run = run_judge_pipeline(llm, cfg, design, QUESTIONS, answer_set(texts, regenerate))
        logs[concurrency] = run.alignment_log
    pd.testing.assert_frame_equal(logs[1], logs[4])
    regenerated = logs[4][logs[4]["regenerations"] > 0]
    assert len(regenerated) == 2 * len(QUESTIONS)
    assert regenerated.groupby("question_id")["cached_calls"].agg(sorted).tolist() == [[0, 1]] * 3


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


# ---------------------------------------------------------------- what a trial re-runs (seed 000, IV-B)


@dataclass
class RunContext:
    """What `answer_context` swaps: a run context's model client."""

    llm: Any


def trial_answers_reply(body: dict) -> str:
    """Judge calls favour the answer shown first; an answer's words are its request's seed ("s<seed>",
    method "short" adds "x"): "long" (max_tokens 97) writes 20 words, "short" 10, unless a target
    length is asked for.
    """
    system = body["messages"][0]["content"]
    if body.get("response_format"):
        return first_position_judge(body)
    target = re.search(r"Write the answer in about (\d+) words", system)
    long = body["max_tokens"] == 97
    n = int(target.group(1)) if target else 20 if long else 10
    return words(n, f"s{body['seed']}" + ("" if long else "x"))


def unbiased_requests(scripted) -> list[dict]:
    judged = [r["body"] for r in scripted.chat_requests() if r["body"].get("response_format")]
    return [b for b in judged if not shown_answers(b)[2]]


def trials_shown(judged: list[dict]) -> set[str]:
    """The seeds of the answers the judge requests showed."""
    return {word.rstrip("x") for b in judged for word in (shown_answers(b)[0].split()[0],)}


def run_trials(scripted, llm, scope: str, trials: int = 3):
    from ragtrial.methods.base import Generator
    from ragtrial.methods.retrieval_method import RetrievalMethod
    from ragtrial.prompts import load_prompt
    from ragtrial.records import Question

    cfg = CFG.model_copy(update={"trials": trials, "trial_scope": scope, "answer_temperature": 0.9})
    questions = [Question(question_id=f"q{i}", question=f"Question {i}?") for i in range(2)]

    def runs(trial: int) -> dict:
        ctx = answer_context(RunContext(llm), cfg, trial)
        return {
            (name, 0): RetrievalMethod(
                name,
                Generator(ctx.llm, load_prompt("summarize_query"), cap, first_line_only=False),
                llm.ledger,
                {},
                None,
                k=1,
                budget=100,
            )
            for name, cap in (("long", 97), ("short", 96))
        }

    design = comparison_design(cfg, ["long", "short"])
    answered = answer_questions(runs(0), questions, runs_for_trial=runs)
    frame = questions_frame(questions)
    return cfg, design, run_judge_pipeline(llm, cfg, design, frame, answered)


def answer_requests(scripted) -> tuple[list[dict], list[dict]]:
    """The answer requests sent, as first written and as regenerated to a target length."""
    bodies = [r["body"] for r in scripted.chat_requests() if not r["body"].get("response_format")]
    hinted = ["Write the answer in" in b["messages"][0]["content"] for b in bodies]
    written = [b for b, h in zip(bodies, hinted, strict=True) if not h]
    return written, [b for b, h in zip(bodies, hinted, strict=True) if h]


def test_trials_of_scope_answers_write_align_and_judge_answers_of_their_own(scripted, tmp_path):
    """Seed 000, IV-B: "We conduct M such trials to account for the LLM's randomness in generating
    responses, and thus the evaluation process is re-executed for each trial" (trials = answers).
    """
    scripted.default_reply = trial_answers_reply
    llm = make_llm(scripted.base_url, tmp_path)
    cfg, design, run = run_trials(scripted, llm, "answers")
    written, regenerated = answer_requests(scripted)
    # every answer written again per trial (2 methods x 2 questions x 3 trials), as samples with a seed
    # of their trial, and the shorter answer of each pair aligned again in every trial
    assert len(written) == 2 * 2 * 3 and len(regenerated) == 2 * 3
    assert sorted(b["seed"] for b in written) == [0] * 4 + [1] * 4 + [2] * 4
    assert {b["temperature"] for b in written} == {0.9}
    assert sorted(run.alignment_log["trial"]) == [0, 0, 1, 1, 2, 2]
    assert (run.alignment_log["regenerations"] == 1).all() and len(run.aligned) == 6
    # trial t's judge calls are shown trial t's answers, nothing else
    judged = unbiased_requests(scripted)
    assert len(judged) == 3 * 1 * 2 * 2  # M x N x 2 positions x questions
    assert trials_shown(judged) == {"s0", "s1", "s2"}
    judged_questions = run.unbiased.judgments.drop_duplicates(["trial", "question_id"])
    assert sorted(judged_questions["trial"]) == [0, 0, 1, 1, 2, 2]
    # each trial's requests had cache keys of their own: none was answered from the cache ...
    answer_rows = llm.ledger.frame().query("stage == 'answer'")
    assert len(answer_rows) == 12 + 6 and not answer_rows["cached"].any()
    # ... and a rerun reuses them all: no request is sent again
    sent = len(scripted.chat_requests())
    rerun_llm = make_llm(scripted.base_url, tmp_path)
    run_trials(scripted, rerun_llm, "answers")
    assert len(scripted.chat_requests()) == sent and rerun_llm.ledger.frame()["cached"].all()
    # the plan counts the answers and alignment once per trial
    plans = {p.stage: p for p in planned_judge_calls(cfg, design, 2, ["long", "short"])}
    assert plans["answer"].calls == len(written)
    assert plans["length_alignment"].calls == 3 * 2 * (cfg.max_regenerations + 1)


def test_trials_of_scope_answers_run_a_few_at_a_time_with_the_same_tables(scripted, tmp_path):
    """Each trial's stages end waiting for their slowest call: above concurrency 1 the other trials'
    calls fill those waits, trial t waiting for trial t - TRIALS_AT_ONCE (so few trials' answers are in
    memory at once); at 1 the trials run one after the other.
    """
    last = f"s{TRIALS_AT_ONCE}"  # the first trial that waits: for trial 0

    def trial_of(body: dict) -> str:  # the seed its answers carry ("s<trial>"), judged or written
        return (
            shown_answers(body)[0].split()[0].rstrip("x")
            if body.get("response_format")
            else f"s{body['seed']}"
        )

    runs = {}
    for concurrency in (1, 4):
        held = InFlight(trial_answers_reply, 0.05, trial_of)
        scripted.default_reply = held
        llm = make_llm(scripted.base_url, tmp_path / f"c{concurrency}", concurrency=concurrency)
        runs[concurrency] = run_trials(scripted, llm, "answers", trials=TRIALS_AT_ONCE + 1)[2]
        if concurrency == 1:
            assert held.together == set()
        else:
            assert frozenset(("s0", "s1")) in held.together
            assert frozenset(("s0", last)) not in held.together
    for name in ("answers", "aligned", "alignment_log"):
        one, four = (getattr(runs[c], name).drop(columns=["latency_s"], errors="ignore") for c in (1, 4))
        pd.testing.assert_frame_equal(one, four, obj=name)
    one, four = (runs[c].unbiased.judgments for c in (1, 4))
    pd.testing.assert_frame_equal(one, four, obj="unbiased judgments")


def test_trials_of_scope_judge_only_judge_the_answers_written_once(scripted, tmp_path):
    """The kit's cheaper option, named and reported: the answers are written and aligned once and
    only the judge is re-sampled per trial.
    """
    scripted.default_reply = trial_answers_reply
    llm = make_llm(scripted.base_url, tmp_path)
    cfg, design, run = run_trials(scripted, llm, "judge_only")
    written, regenerated = answer_requests(scripted)
    assert len(written) == 2 * 2 and len(regenerated) == 2
    assert {b["seed"] for b in written} == {0}
    judged = unbiased_requests(scripted)
    assert len(judged) == 3 * 1 * 2 * 2 and trials_shown(judged) == {"s0"}
    assert set(run.unbiased.judgments["trial"]) == {0, 1, 2} and set(run.alignment_log["trial"]) == {0}
    plans = {p.stage: p for p in planned_judge_calls(cfg, design, 2, ["long", "short"])}
    assert plans["answer"].calls == len(written)


def test_trial_scope_answers_refuses_answers_it_cannot_write_again(scripted, tmp_path):
    llm = make_llm(scripted.base_url, tmp_path)
    cfg = CFG.model_copy(update={"trial_scope": "answers"})
    texts = {(q, m, 0): words(20) for q in QUESTIONS["question_id"] for m in ("naive_rag", "hybrid")}
    with pytest.raises(ValueError, match="written again per trial"):
        design = comparison_design(cfg, ["naive_rag", "hybrid"])
        run_judge_pipeline(llm, cfg, design, QUESTIONS, answer_set(texts))
    assert scripted.chat_requests() == []


def test_the_narrative_says_what_the_trials_re_ran(scripted, tmp_path):
    from ragtrial.evaluation.findings import findings_table
    from ragtrial.evaluation.judge.findings import run_findings
    from ragtrial.report.narrative.judge import alignment_sentence

    scripted.default_reply = trial_answers_reply
    for scope, wording in (
        ("answers", "Each of the 3 trials wrote"),
        ("judge_only", "`trial_scope: judge_only`"),
    ):
        _, _, run = run_trials(scripted, make_llm(scripted.base_url, tmp_path / scope), scope)
        assert wording in alignment_sentence(findings_table(run_findings(run)))


def test_the_report_says_which_rubric_is_the_papers_wording_and_which_are_the_kits(scripted, tmp_path):
    """Seed 000 prints the grading criteria of Directness alone (Table I): the judge is shown that
    rubric in the paper's words and three of the kit's, and the report says which is which.
    """
    from ragtrial.evaluation.findings import findings_table
    from ragtrial.evaluation.judge.findings import run_findings
    from ragtrial.report.narrative.judge import rubric_sentence

    scripted.default_reply = first_position_judge
    llm = make_llm(scripted.base_url, tmp_path)
    texts = {
        (q, "naive_rag", r): words(20, w)
        for q in QUESTIONS["question_id"]
        for r, w in ((0, "fact"), (1, "data"))
    }
    run = run_judge_pipeline(llm, CFG, self_check_design(CFG), QUESTIONS, answer_set(texts))
    scored = [
        r["body"]["messages"][-1]["content"] for r in scripted.chat_requests() if "[Answer 1]" in str(r)
    ]
    table_i = (  # seed 000, Table I, 0 points
        "0 points: The answer is extremely indirect, failing to address the question specifically and "
        "clearly."
    )
    assert scored and all(table_i in prompt for prompt in scored)  # the paper's words reach the judge
    findings = findings_table(run_findings(run))
    wording = findings[findings["statement"] == "rubric_wording"].set_index("subject")["value"]
    assert wording.to_dict() == {
        "comprehensiveness": 0.0,
        "relevance": 0.0,
        "empowerment": 0.0,
        "directness": 1.0,
    }
    sentence = rubric_sentence(findings)
    assert "directness is the paper's wording" in sentence
    assert "comprehensiveness, relevance, empowerment are the kit's own wording" in sentence


def test_the_judge_compares_every_pair_of_paper_judges_methods_and_only_the_listed_pairs_of_the_systems():
    # seed 000's judge.methods (Figs. 14-16, all pairs) and judge.pairs (Fig. 14, each system vs NaiveRAG)
    def pairs(params: str) -> list[tuple[str, str]]:
        (spec,) = [s for s in batch_runs(params) if s.notebook == "07_pairwise_method_comparison"]
        cfg = spec.settings.judge
        return list(comparison_design(cfg, cfg.methods).method_pairs)

    judged = pairs("params/paper_judge.yaml")
    assert len(judged) == 6 and {frozenset(p) for p in judged} == {
        frozenset(p) for p in combinations(["lightrag", "fastgraphrag", "local_search", "naive_rag"], 2)
    }
    systems = pairs("params/paper_upstream_systems.yaml")
    assert len(systems) == 3 and all(b == "naive_rag" for _, b in systems)
