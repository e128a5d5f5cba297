"""LLM-as-judge protocols with scripted judges: biases the protocols must expose or neutralize."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from conftest import make_llm

from ragtrial.config.judge import JudgeSettings
from ragtrial.evaluation.judge.aggregate import (
    aggregate_unbiased,
    alignment_summary,
    all_pairs_matrix,
    classic_summary,
)
from ragtrial.evaluation.judge.answers import SampledLLM, answer_questions
from ragtrial.evaluation.judge.audits import length_bias, length_verdicts, position_table
from ragtrial.evaluation.judge.cost_plan import EMBEDDED_THROUGHPUT, estimate_cost, judge_prompt_tokens
from ragtrial.evaluation.judge.pairs import PAIR_COLUMNS, align_lengths
from ragtrial.evaluation.judge.protocols import (
    CLASSIC_ASPECTS,
    FAILURE_COLUMNS,
    Judgments,
    judge_classic,
    judge_unbiased,
)
from ragtrial.llm.errors import LLMError

ASPECTS = ("comprehensiveness", "relevance", "empowerment", "directness")


def words(n: int, word: str = "fact") -> str:
    return " ".join([word] * n)


def self_pairs(lengths: list[tuple[int, int]]) -> pd.DataFrame:
    """One method against itself (runs 0 and 1) on one question per (length A, length B)."""
    rows = [
        (
            f"q{i}",
            f"Question {i}?",
            "single_hop" if i % 2 else "multi_hop",
            "rag",
            0,
            words(la),
            "rag",
            1,
            words(lb, "data"),
        )
        for i, (la, lb) in enumerate(lengths)
    ]
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def shown_answers(body: dict) -> tuple[str, str, bool]:
    """The two answers in a judge request as shown (slot 1, slot 2), and whether it is the classic prompt."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    scored = re.search(
        r"\[Answer 1\]\n(.*)\n\[End of Answer 1\]\n\n\[Answer 2\]\n(.*)\n\[End of Answer 2\]", user, re.S
    )
    if scored:
        return scored.group(1), scored.group(2), False
    classic = re.search(r"Answer 1:\n(.*)\n\nAnswer 2:\n(.*)\n\nReply with JSON", user, re.S)
    return classic.group(1), classic.group(2), True


def reply(prefer_first: bool | None, classic: bool) -> str:
    """Scores favouring slot 1 (True), slot 2 (False) or neither (None)."""
    if classic:
        slot = 2 if prefer_first is False else 1
        return json.dumps({a: slot for a in (*CLASSIC_ASPECTS, "overall")})
    first, second = {True: (5, 2), False: (2, 5), None: (3, 3)}[prefer_first]
    return json.dumps({"answer_1": [first] * len(ASPECTS), "answer_2": [second] * len(ASPECTS)})


def first_position_judge(body: dict) -> str:
    return reply(True, shown_answers(body)[2])


def longer_answer_judge(body: dict) -> str:
    first, second, classic = shown_answers(body)
    gap = len(first.split()) - len(second.split())
    return reply(None if gap == 0 else gap > 0, classic)


def run_unbiased(llm, pairs: pd.DataFrame, trials: int = 2, repeats: int = 1) -> Judgments:
    return judge_unbiased(llm, pairs, ASPECTS, trials=trials, repeats=repeats, max_tokens=60, temperature=0.7)


def test_first_position_judge_wins_classic_and_ties_unbiased(scripted, tmp_path):
    scripted.default_reply = first_position_judge
    llm = make_llm(scripted.base_url, tmp_path)
    pairs = self_pairs([(40, 40)] * 4)
    classic = classic_summary(judge_classic(llm, pairs, max_tokens=48, temperature=0.7))
    overall = classic[classic["aspect"] == "overall"].iloc[0]
    assert overall["win_rate_a"] == 1.0 and overall["relative_win_rate"] == 1.0
    unbiased = aggregate_unbiased(run_unbiased(llm, pairs), resamples=200)
    summary = unbiased.summary.iloc[0]
    assert summary["tie_rate"] == 1.0 and summary["relative_win_rate"] == 0.0
    assert summary["rwr_ci_low"] == summary["rwr_ci_high"] == 0.0
    # Judged from one order alone, the bias is plain: A always wins in AB and always loses in BA.
    by_position = unbiased.positions.set_index("position")
    assert by_position.loc["AB", "win_rate"] == 1.0 and by_position.loc["BA", "loss_rate"] == 1.0


def test_longer_answer_judge_is_neutralized_by_length_alignment(scripted, tmp_path):
    scripted.default_reply = longer_answer_judge
    llm = make_llm(scripted.base_url, tmp_path)
    pairs = self_pairs([(60, 20), (15, 45), (50, 30)])
    raw = aggregate_unbiased(run_unbiased(llm, pairs), resamples=200).outcomes
    assert set(raw["outcome"]) == {"win", "loss"}  # the longer answer always wins before alignment

    requests = []

    def regenerate(question_id, method, replicate, target_words):
        requests.append((question_id, replicate, target_words))
        return words(target_words, "redo")

    aligned, log = align_lengths(
        pairs, regenerate, lambda *a: pytest.fail("no append needed"), tolerance=10, max_attempts=2
    )
    assert requests == [("q0", 1, 60), ("q1", 0, 45), ("q2", 1, 50)]  # the shorter side, to the longer length
    assert list(log["status"]) == ["aligned"] * 3 and list(log["gap_after"]) == [0, 0, 0]
    after = aggregate_unbiased(run_unbiased(llm, aligned), resamples=200)
    assert set(after.outcomes["outcome"]) == {"tie"} and after.summary["relative_win_rate"].iloc[0] == 0.0


def test_alignment_adapts_requests_then_forces_then_discards():
    pairs = self_pairs([(40, 10), (40, 10), (40, 10), (40, 10)])
    requests = []

    def undershoot(question_id, method, replicate, target_words):  # always 5 words short of the request
        requests.append(target_words)
        return words(target_words - 5)

    aligned, log = align_lengths(pairs.iloc[:1], undershoot, None, tolerance=2, max_attempts=3)
    assert requests == [40, 45] and log["regenerations"].iloc[0] == 2 and len(aligned) == 1

    def stuck(question_id, method, replicate, target_words):
        return words(12)

    def append_exact(question, answer, n_words, method):
        return words(n_words, "more")

    def raise_parse(*args):
        raise LLMError("parse", "no reply")

    outcomes = [
        align_lengths(pairs.iloc[[i]], stuck, fn, tolerance=10, max_attempts=2)
        for i, fn in ((1, append_exact), (2, lambda *a: "too short"))
    ]
    outcomes.append(align_lengths(pairs.iloc[[3]], raise_parse, append_exact, tolerance=10, max_attempts=2))
    log = pd.concat([o[1] for o in outcomes])
    assert list(log["status"]) == ["aligned", "discarded", "failed"]
    assert list(log["forced"]) == [True, True, False] and list(log["regenerations"]) == [2, 2, 0]
    assert len(outcomes[1][0]) == 0 and len(outcomes[2][0]) == 0  # discarded and failed pairs are not judged
    summary = alignment_summary(log)
    assert summary["pairs"].iloc[0] == 3 and summary["aligned_share"].iloc[0] == pytest.approx(1 / 3)


def hand_judgments() -> Judgments:
    """Two pairs, two trials, four questions, one aspect, one repeat: totals chosen by hand."""
    totals = {  # (pair, trial) -> per question (A's score, B's score) summed over AB and BA
        ("x", 0): [(8, 6), (5, 5), (7, 9), (9, 4)],
        ("x", 1): [(8, 6), (6, 5), (4, 4), (3, 4)],
        ("y", 0): [(5, 6), (5, 6), (5, 5), (2, 4)],
        ("y", 1): [(5, 6), (6, 6), (3, 5), (4, 5)],
    }
    rows = []
    for (other, trial), scores in totals.items():
        for i, (a, b) in enumerate(scores):
            for position, (sa, sb) in (("AB", (a - a // 2, b - b // 2)), ("BA", (a // 2, b // 2))):
                rows.append(
                    {
                        "trial": trial,
                        "repeat": 0,
                        "position": position,
                        "question_id": f"q{i}",
                        "question_type": "t",
                        "method_a": "rag",
                        "replicate_a": 0,
                        "method_b": other,
                        "replicate_b": 0,
                        "aspect": "relevance",
                        "score_a": sa,
                        "score_b": sb,
                    }
                )
    return Judgments(pd.DataFrame(rows), pd.DataFrame(columns=FAILURE_COLUMNS))


def test_relative_win_rate_and_holm_match_hand_computed_tables():
    result = aggregate_unbiased(hand_judgments(), resamples=500)
    trials = result.trials.set_index(["method_b", "trial"])
    # x trial 0: win, tie, loss, win -> (2 - 1) / 4; x trial 1: win, win, tie, loss -> 1 / 4
    # y trial 0: loss, loss, tie, loss -> -3 / 4;     y trial 1: loss, tie, loss, loss -> -3 / 4
    expected = {
        ("x", 0): (2, 1, 1, 0.25),
        ("x", 1): (2, 1, 1, 0.25),
        ("y", 0): (0, 1, 3, -0.75),
        ("y", 1): (0, 1, 3, -0.75),
    }
    for key, (win, tie, loss, rwr) in expected.items():
        assert tuple(trials.loc[key, ["win", "tie", "loss"]]) == (win, tie, loss)
        assert trials.loc[key, "relative_win_rate"] == pytest.approx(rwr)
    summary = result.summary.set_index("method_b")
    p = summary["p_value"]
    low, high = sorted(p.index, key=lambda k: p[k])
    assert summary.loc[low, "p_holm"] == pytest.approx(min(1.0, 2 * p[low]))
    assert summary.loc[high, "p_holm"] == pytest.approx(min(1.0, max(2 * p[low], p[high])))
    # y per question over the two trials: (loss, loss), (loss, tie), (tie, loss), (loss, loss) -> codes
    # -1, -0.5, -0.5, -1, whose mean is the mean relative win rate; its interval stays below zero.
    assert summary.loc["y", "relative_win_rate"] == pytest.approx(-0.75)
    assert -1.0 <= summary.loc["y", "rwr_ci_low"] < -0.75 < summary.loc["y", "rwr_ci_high"] <= -0.5
    matrix = all_pairs_matrix(result.summary, ["rag", "x", "y"])
    assert matrix.loc["rag", "y"] == pytest.approx(-0.75) and matrix.loc["y", "rag"] == pytest.approx(0.75)
    assert np.isnan(matrix.loc["x", "y"]) and np.isnan(matrix.loc["rag", "rag"])


def test_trial_and_repeat_indices_are_distinct_cached_calls(scripted, tmp_path):
    scripted.default_reply = first_position_judge
    llm = make_llm(scripted.base_url, tmp_path)
    pairs = self_pairs([(30, 30)])
    first = run_unbiased(llm, pairs, trials=2, repeats=2)
    requests = scripted.chat_requests()
    assert len(requests) == 2 * 2 * 2  # trials x repeats x positions, one pair
    keys = {(r["body"]["seed"], r["body"]["messages"][-1]["content"]) for r in requests}
    assert len(keys) == 8 and {r["body"]["seed"] for r in requests} == {0, 1, 2, 3}
    again = run_unbiased(llm, pairs, trials=2, repeats=2)
    assert len(scripted.chat_requests()) == 8  # every call replayed from the cache
    pd.testing.assert_frame_equal(first.judgments, again.judgments)
    assert llm.ledger.frame()["cached"].sum() == 8


def test_parse_failures_are_counted_and_excluded_not_scored(scripted, tmp_path):
    def flaky(body):  # q1 never parses; q2 fails only in trial 1 (seed 1)
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if "Question 1?" in user or ("Question 2?" in user and body["seed"] == 1):
            return "I think both answers are fine."
        return first_position_judge(body)

    scripted.default_reply = flaky
    llm = make_llm(scripted.base_url, tmp_path)
    run = run_unbiased(llm, self_pairs([(20, 20)] * 4))
    assert set(run.failures["kind"]) == {"parse"}
    assert sorted(run.failures.groupby("trial")["question_id"].unique().map(sorted).map(tuple)) == [
        ("q1",),
        ("q1", "q2"),
    ]
    assert not run.judgments["question_id"].isin(["q1"]).any()
    assert run.judgments[["score_a", "score_b"]].notna().all().all()
    result = aggregate_unbiased(run, resamples=200)
    trials = result.trials.set_index("trial")
    assert list(trials["n"]) == [3, 2] and list(trials["excluded"]) == [1, 2]
    assert result.summary["excluded"].iloc[0] == 3


def test_length_bias_and_position_audits_of_classic_judgments(scripted, tmp_path):
    pairs = self_pairs([(60, 20), (15, 45), (30, 30)])
    scripted.default_reply = longer_answer_judge
    llm = make_llm(scripted.base_url, tmp_path)
    both = ("AB", "BA")
    binned = length_bias(pairs, judge_classic(llm, pairs, max_tokens=48, temperature=0.7, positions=both))
    assert list(binned["verdicts"]) == [2] and list(binned["longer_win_rate"]) == [1.0]
    scripted.default_reply = first_position_judge
    run = judge_classic(
        make_llm(scripted.base_url, tmp_path / "fresh"), pairs, max_tokens=48, temperature=0.7, positions=both
    )
    assert length_verdicts(pairs, run)["longer_won"].mean() == 0.5  # each order's verdicts: half each
    exchanged = length_bias(pairs, run)  # position bias removed: the two orders disagree, so ties
    assert list(exchanged["verdicts"]) == [0] and list(exchanged["ties"]) == [2]
    overall = classic_summary(run).query("aspect == 'overall'").set_index("position")
    assert list(overall["first_slot_win_rate"]) == [1.0, 1.0]
    assert overall.loc["AB", "win_rate_a"] == 1.0 and overall.loc["BA", "win_rate_a"] == 0.0
    unbiased_positions = aggregate_unbiased(run_unbiased(llm, pairs), resamples=200).positions
    audit = position_table(classic_summary(run), unbiased_positions).set_index(["protocol", "order"])
    assert list(audit["first_shown_win_rate"]) == [1.0] * 4  # both protocols, both orders
    assert list(audit["a_win_rate"]) == [1.0, 0.0, 1.0, 0.0]


def test_cost_estimate_counts_every_call_of_the_protocol():
    paper = JudgeSettings(trials=25, repeats=2, max_regenerations=3)
    table = estimate_cost(
        paper,
        150,
        6,
        n_answers=600,
        question_tokens=20,
        answer_tokens=200,
        answer_prompt_tokens=1500,
        throughput=EMBEDDED_THROUGHPUT,
    )
    calls = table.set_index("step")["calls"]
    assert calls["unbiased judge"] == 25 * 2 * 2 * 150 * 6
    assert calls["classic judge"] == 150 * 6 and calls["length alignment (at most)"] == 150 * 6 * 4
    assert calls["answers"] == 600
    per_call = judge_prompt_tokens(paper.aspects, 20, 200)
    assert per_call > 420 + 300  # the rubrics alone are a few hundred tokens
    unbiased = table.set_index("step").loc["unbiased judge"]
    assert unbiased["seconds_est"] == round(
        calls["unbiased judge"] * (per_call / 400 + paper.judge_max_tokens / 10)
    )
    answers = table.set_index("step").loc["answers"]
    assert answers["seconds_est"] == round(600 * (1500 / 400 + paper.answer_max_tokens / 40))


def test_two_sampled_runs_and_regeneration_go_through_the_method(scripted, tmp_path):
    from ragtrial.methods.base import Generator
    from ragtrial.methods.retrieval_method import RetrievalMethod
    from ragtrial.prompts import load_prompt
    from ragtrial.records import Question

    scripted.default_reply = lambda body: words(
        30 if "Write the answer in" in body["messages"][0]["content"] else 12
    )
    llm = make_llm(scripted.base_url, tmp_path)

    def closed_book(run_llm):
        generator = Generator(run_llm, load_prompt("summarize_query"), 96, first_line_only=False)
        return RetrievalMethod("closed_book", generator, llm.ledger, {}, None, k=1, budget=100)

    runs = {("closed_book", r): closed_book(SampledLLM(llm, r, 0.9)) for r in (0, 1)}
    answered = answer_questions(runs, [Question(question_id="q0", question="What happened?")])
    assert list(answered.frame["replicate"]) == [0, 1] and set(answered.frame["text"]) == {words(12)}
    first = scripted.chat_requests()
    assert [(r["body"]["seed"], r["body"]["temperature"]) for r in first] == [(0, 0.9), (1, 0.9)]
    assert answered.regenerate("q0", "closed_book", 1, 30) == words(30)
    hinted = scripted.chat_requests()[-1]["body"]
    assert hinted["seed"] == 1 and "Write the answer in about 30 words." in hinted["messages"][0]["content"]
    # The answer prompt's own cap is removed, so the request states one length, not two.
    assert "at most about 80 words" not in hinted["messages"][0]["content"]
    assert "summarize_query@v1-length_rule+align_regenerate@v1" in set(llm.ledger.frame()["prompt"])


@pytest.mark.usefixtures("embedded_model")
def test_embedded_model_replies_in_both_judge_schemas(tmp_path):
    """llama.cpp's grammar must accept both reply schemas (score enums in fixed-length lists)."""
    from ragtrial.config.llm import LLMSettings
    from ragtrial.llm.cache import ResponseCache
    from ragtrial.llm.client import LLM
    from ragtrial.llm.ledger import Ledger
    from ragtrial.llm.server import EmbeddedServer

    settings = LLMSettings()
    server = EmbeddedServer(settings, tmp_path / "server.log")
    base_url = server.start()
    try:
        llm = LLM(settings, ResponseCache(tmp_path / "c.sqlite"), Ledger("t"), lambda: base_url)
        pairs = self_pairs([(12, 6)])
        unbiased = judge_unbiased(
            llm, pairs.iloc[:1], ASPECTS, trials=1, repeats=1, max_tokens=48, temperature=0.7
        )
        classic = judge_classic(llm, pairs, max_tokens=48, temperature=0.7)
    finally:
        server.stop()
    # Every call is either a full judgment or a recorded failure, never a partial or a zero score.
    assert len(unbiased.judgments) // len(ASPECTS) + len(unbiased.failures) == 2
    assert unbiased.judgments[["score_a", "score_b"]].isin(range(6)).all().all()
    assert len(classic.judgments) // 5 + len(classic.failures) == 1
    assert len(unbiased.judgments) % len(ASPECTS) == 0 and len(classic.judgments) % 5 == 0


def test_the_estimate_s_question_length_is_the_mean_and_zero_without_questions():
    from ragtrial.evaluation.judge.cost_plan import mean_question_tokens
    from ragtrial.llm.tokens import count_tokens

    questions = ["Who is Ada?", "Which city did Kel leave in the spring of 1920?"]
    assert mean_question_tokens(questions) == int(sum(map(count_tokens, questions)) / 2) > 0
    assert mean_question_tokens([]) == 0  # every generation call failed: no NaN for the estimate


def test_alignment_rewrites_the_answer_shorter_as_generated_even_after_it_overshoots(scripted, tmp_path):
    """Seed 000 §IV-B: "we adjust the shorter answer to match the length of the longer answer". Run 0
    answers in 10 words, run 1 in 40; the first rewrite of run 0 overshoots to 60 words, so run 1 is
    now the shorter, yet every rewrite request is run 0's (seed 0) and the forced append extends run
    0's answer: run 1's text (beta) is in no request after the first answers.
    """
    from ragtrial.evaluation.judge.pairs import llm_appender
    from ragtrial.methods.base import Generator
    from ragtrial.methods.retrieval_method import RetrievalMethod
    from ragtrial.prompts import load_prompt
    from ragtrial.records import Question

    rewrites = iter([60, 30])  # words of run 0's successive rewrites: an overshoot, then 10 short of 40

    def model(body):
        system, user = (m["content"] for m in body["messages"])
        if "must become about" in user:  # the forced append
            return words(int(re.search(r"about (\d+) words longer", user).group(1)), "more")
        if "Write the answer in" in system:  # a rewrite with the target length
            return words(next(rewrites), "redo")
        return words(10, "alpha") if body["seed"] == 0 else words(40, "beta")

    scripted.default_reply = model
    llm = make_llm(scripted.base_url, tmp_path)

    def closed_book(run_llm):
        generator = Generator(run_llm, load_prompt("summarize_query"), 96, first_line_only=False)
        return RetrievalMethod("rag", generator, llm.ledger, {}, None, k=1, budget=100)

    runs = {("rag", r): closed_book(SampledLLM(llm, r, 0.9)) for r in (0, 1)}
    answered = answer_questions(runs, [Question(question_id="q0", question="What happened?")])
    pairs = self_pairs([(0, 0)]).assign(
        question="What happened?", text_a=words(10, "alpha"), text_b=words(40, "beta")
    )
    generated = len(scripted.chat_requests())
    aligned, log = align_lengths(
        pairs, answered.regenerate, llm_appender(llm, 0.9), tolerance=5, max_attempts=2
    )
    later = [r["body"] for r in scripted.chat_requests()[generated:]]
    rewrites_sent = [b for b in later if "Write the answer in" in b["messages"][0]["content"]]
    appends_sent = [b for b in later if "must become about" in b["messages"][-1]["content"]]
    assert [b["seed"] for b in rewrites_sent] == [0, 0]  # run 0 both times, though it overshot first
    # The second request asks 20 words below the target, since the first came back 20 over.
    assert [re.search(r"about (\d+) words", b["messages"][0]["content"]).group(1) for b in rewrites_sent] == [
        "40",
        "20",
    ]
    assert len(appends_sent) == 1
    appended_to = appends_sent[0]["messages"][-1]["content"]
    assert words(30, "redo") in appended_to
    assert not any("beta beta" in m["content"] for b in later for m in b["messages"])
    assert list(log["status"]) == ["aligned"] and log["forced"].iloc[0]
    assert aligned["text_b"].iloc[0] == words(40, "beta")  # the longer answer as generated
    assert len(aligned["text_a"].iloc[0].split()) == 40
