"""The classic judge as the seed papers ran it (issue 13): each fixed order a condition of its own
with the order flip reported (seed 000, Fig. 2), and the GraphRAG paper's judge that may call a
tie, asked five times, tested with Wilcoxon and Holm (Experiment 1) and collapsed by majority for
the claims agreement (Experiment 2).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import make_llm
from test_judge import first_position_judge, self_pairs

from ragtrial.config.claims import ClaimsSettings
from ragtrial.config.judge import JudgeSettings
from ragtrial.evaluation.claim_verdicts import judge_agreement, judge_verdicts
from ragtrial.evaluation.claims_findings import claims_findings
from ragtrial.evaluation.findings import findings_table
from ragtrial.evaluation.judge.aggregate import aggregate_unbiased, classic_summary
from ragtrial.evaluation.judge.audits import (
    EXCHANGED_CLASSIC_VERDICTS,
    length_bias,
    length_verdicts,
    order_flip_table,
    sanity_table,
)
from ragtrial.evaluation.judge.cost_plan import estimate_cost
from ragtrial.evaluation.judge.findings import unbiased_pairs_findings
from ragtrial.evaluation.judge.protocols import (
    CALL_KEY,
    CLASSIC_ASPECTS,
    FAILURE_COLUMNS,
    Judgments,
    judge_classic,
)
from ragtrial.report.narrative.claims import tie_share_sentence, verdict_source_sentence
from ragtrial.report.narrative.judge import classic_order_sentences, comparison_findings

pytestmark = pytest.mark.fault


def test_each_fixed_order_is_its_own_condition_and_the_flip_is_reported(scripted, tmp_path):
    scripted.default_reply = first_position_judge  # the answer shown first always wins
    llm = make_llm(scripted.base_url, tmp_path)
    pairs = self_pairs([(40, 40)] * 4)
    run = judge_classic(llm, pairs, max_tokens=48, temperature=0.7, positions=("AB", "BA"))
    table = classic_summary(run, resamples=200)
    overall = table[table["aspect"] == "overall"].set_index("position")
    assert list(overall["questions"]) == [4, 4]  # not pooled into one 8-vote condition
    assert overall.loc["AB", "score_a"] == 1.0 and overall.loc["BA", "score_a"] == 0.0
    flips = order_flip_table(table)
    flip = flips[flips["aspect"] == "overall"].iloc[0]
    assert (flip["a_first_score"], flip["b_first_score"], flip["flip"]) == (1.0, 0.0, 1.0)
    sentence = classic_order_sentences(table, flips)[0]
    assert "A shown first, A's win rate 100%" in sentence and "B shown first, A's win rate 0%" in sentence
    assert "Order flip (A-first minus B-first win rate): +100%" in sentence


def test_the_default_classic_protocol_stays_one_order_one_call():
    default = JudgeSettings()
    assert (default.classic_positions, default.classic_repeats, default.classic_ties) == (["AB"], 1, False)
    assert default.unbiased
    both = JudgeSettings(classic_positions=["AB", "BA"])
    sizes = {"n_answers": 8, "question_tokens": 10, "answer_tokens": 50, "answer_prompt_tokens": 200}
    one = estimate_cost(default, 4, 1, **sizes).set_index("step")["calls"]
    two = estimate_cost(both, 4, 1, classic_positions=2, **sizes).set_index("step")["calls"]
    assert one["classic judge"] == 4 and two["classic judge"] == 8


def ties_and_repeats_judge(body: dict) -> str:
    """Comprehensiveness by repeat (the request's seed): q0 wins 3 of 5 for the first answer; q1 wins
    2, ties 2 and loses 1 (the paper's example of no majority); every other criterion a tie.
    """
    user = body["messages"][-1]["content"]
    assert "0 for a tie" in user  # the prompt that lets the judge call a tie
    question = "q0" if "Question 0?" in user else "q1"
    votes = {"q0": [1, 1, 1, 2, 2], "q1": [1, 1, 0, 0, 2]}[question]
    slot = votes[body["seed"] % 5]
    return json.dumps({a: (slot if a == "comprehensiveness" else 0) for a in (*CLASSIC_ASPECTS, "overall")})


def test_the_graphrag_judge_calls_ties_over_five_repeats_and_tests_each_pair(scripted, tmp_path):
    scripted.default_reply = ties_and_repeats_judge
    llm = make_llm(scripted.base_url, tmp_path)
    pairs = self_pairs([(40, 40)] * 2)
    run = judge_classic(llm, pairs, max_tokens=48, temperature=0.7, repeats=5, ties=True)
    assert len(scripted.chat_requests()) == 10 and set(run.judgments["repeat"]) == set(range(5))
    table = classic_summary(run, resamples=200).set_index("aspect")
    comprehensive = table.loc["comprehensiveness"]
    assert (comprehensive["wins_a"], comprehensive["ties"], comprehensive["wins_b"]) == (5, 2, 3)
    assert comprehensive["score_a"] == pytest.approx((3 / 5 + (2 + 2 * 0.5) / 5) / 2)  # win 1, tie 1/2
    assert table.loc["overall", "score_a"] == 0.5 and table.loc["overall", "tie_rate"] == 1.0
    assert comprehensive["test"] == "wilcoxon" and 0 < comprehensive["p_value"] <= 1
    assert comprehensive["p_holm"] == comprehensive["p_value"]  # one pair: Holm leaves it alone


def test_claims_agreement_collapses_five_repeats_with_ties_by_majority(scripted, tmp_path):
    scripted.default_reply = ties_and_repeats_judge
    llm = make_llm(scripted.base_url, tmp_path)
    questions = pd.DataFrame(
        {"question_id": ["q0", "q1"], "question": ["Question 0?", "Question 1?"], "question_type": "global"}
    )
    answers = pd.DataFrame(
        {
            "question_id": ["q0", "q0", "q1", "q1"],
            "method": ["c0", "ss", "c0", "ss"],
            "text": ["long answer", "short", "long answer", "short"],
            "failure": "",
        }
    )
    cfg = ClaimsSettings(methods=["c0", "ss"], judge="classic", judge_positions=["AB"])
    judge_cfg = JudgeSettings(classic_repeats=5, classic_ties=True)
    verdicts, judged, source = judge_verdicts(llm, cfg, judge_cfg, questions, answers, ["c0", "ss"])
    assert (
        judged.failures.empty
        and "5 vote(s) per shown order (AB), ties allowed" in verdict_source_sentence(source)
    )
    assert source.loc[0, ["question_pairs", "failed_judge_calls"]].tolist() == [2, 0]
    assert len(judged.costs) == 2 * 5 and not judged.costs["failed"].any()  # questions x repeats, one order
    assert verdicts["outcome"].value_counts().to_dict() == {"tie": 42, "win": 5, "loss": 3}
    metrics = pd.DataFrame(
        {
            "measure": "comprehensiveness",
            "metric": "comprehensiveness",
            "threshold": None,
            "question_id": ["q0", "q0", "q1", "q1"],
            "method": ["c0", "ss", "c0", "ss"],
            "value": [6.0, 2.0, 6.0, 2.0],
        }
    )
    agreement = judge_agreement(metrics, verdicts, n_resamples=200).iloc[0]
    # q0: 3 of 5 votes for c0, a majority; q1: 2 wins, 2 ties, 1 loss, no majority, a tie.
    assert (agreement["judged"], agreement["non_tie"], agreement["agree"]) == (2, 1, 1)
    assert "means what the paper's 33% / 39% mean" in tie_share_sentence(judge_ties(judge_cfg.classic_ties))
    assert "not comparable" in tie_share_sentence(judge_ties(False))


def judge_ties(could_tie: bool):
    """Notebook 08's findings with whether its judge could call a tie."""
    counts = pd.DataFrame(columns=["answers", "at_cap", "failed_answer", "failed_extraction"])
    return findings_table(claims_findings(counts, ClaimsSettings(), could_tie, embedded=False))


def classic_votes(**columns) -> Judgments:
    """Two overall classic votes, shown AB in trial 0: A wins the first, the second is a tie."""
    frame = {"trial": 0, "position": "AB", "question_type": "global", "replicate_a": 0, "aspect": "overall"}
    frame |= columns | {"winner": ["a", "tie"], "winner_slot": [1, 0]}
    return Judgments(pd.DataFrame(frame), pd.DataFrame(columns=FAILURE_COLUMNS))


def test_without_the_unbiased_protocol_07_reports_the_classic_one_alone():
    classic = classic_votes(repeat=[0, 1], question_id="q0", method_a="c0", method_b="ss", replicate_b=0)
    table = classic_summary(classic, resamples=200)
    nothing_judged = Judgments(
        pd.DataFrame(columns=[*CALL_KEY, "aspect", "score_a", "score_b"]),
        pd.DataFrame(columns=FAILURE_COLUMNS),
    )
    unbiased = aggregate_unbiased(nothing_judged, resamples=200)
    assert unbiased.summary.empty
    sanity = sanity_table(table, unbiased.summary)
    counted = findings_table(unbiased_pairs_findings(unbiased.summary))
    text = comparison_findings(sanity, table, order_flip_table(table), unbiased.summary, counted)
    assert "c0 vs ss, classic overall**: A shown first, A's win rate 75%" in text


def test_length_bias_bins_position_exchanged_verdicts_by_token_gap():
    """Fig. 6: the token gap, with position bias removed (both orders exchanged per question)."""
    pairs = self_pairs([(60, 20), (15, 45), (30, 30), (22, 20), (35, 5), (50, 10)])
    # Word gap 0, token gap 4: "internationalization" is two cl100k tokens.
    pairs.loc[2, ["text_a", "text_b"]] = [" ".join(["internationalization"] * 4), " ".join(["fact"] * 4)]
    winners = {  # question -> A's verdict shown first (AB), then shown second (BA)
        "q0": ("a", "a"),  # the longer answer named in both orders: it wins (gap 40 tokens)
        "q1": ("a", "b"),  # the answer shown first wins each order: a tie once exchanged (gap 30)
        "q2": ("a", "a"),  # the longer in tokens wins (gap 4, equal in words)
        "q3": ("b", "b"),  # the shorter wins both orders (gap 2)
        "q4": ("b", "b"),  # the shorter wins both orders (gap 30)
        "q5": ("a", None),  # judged in one order only: nothing to exchange, left out
    }
    rows = [
        {"trial": 0, "repeat": 0, "position": position, "question_id": q, "question_type": "t",
         "method_a": "rag", "replicate_a": 0, "method_b": "rag", "replicate_b": 1, "aspect": "overall",
         "winner": w, "winner_slot": 1 if (w == "a") == (position == "AB") else 2}
        for q, pair in winners.items()
        for position, w in zip(("AB", "BA"), pair, strict=True)
        if w is not None
    ]  # fmt: skip
    judged = Judgments(pd.DataFrame(rows), pd.DataFrame(columns=FAILURE_COLUMNS))
    binned = length_bias(pairs, judged)
    by_bin = binned.set_index("gap_bin")
    assert list(by_bin.index) == ["[0.0, 5.0)", "[25.0, 50.0)"]
    assert list(by_bin["verdicts"]) == [2, 2] and list(by_bin["ties"]) == [0, 1]
    assert list(by_bin["longer_win_rate"]) == [0.5, 0.5]  # q2 won, q3 lost; q0 won, q4 lost
    assert list(by_bin["mean_gap_tokens"]) == [3.0, pytest.approx(100 / 3)]
    assert set(binned["verdicts_from"]) == {EXCHANGED_CLASSIC_VERDICTS}
    # Each order's verdicts by word gap (the calibration's input) still count q1's two orders apart.
    per_order = length_verdicts(pairs, judged)
    assert sorted(per_order.query("question_id == 'q1'")["longer_won"]) == [False, True]
    assert "q2" not in set(per_order["question_id"])  # no word gap
