"""The simulated capable endpoint (issue 36): every structured request the kit sends gets a reply
its own parser accepts, its 429s are waited out by the kit's client, and its judge's planted truth
is recovered by the kit's judge protocols.
"""

from __future__ import annotations

import re
import subprocess

import pandas as pd
import pytest
from capable_server import CapableServer, CapableServerProcess, Truth, true_relative_win_rate
from conftest import PROJECT_ROOT, make_llm

from ragtrial.evaluation.claims import claims_reply_schema
from ragtrial.evaluation.grounding import SupportVerdict
from ragtrial.evaluation.judge.aggregate import aggregate_unbiased, classic_summary
from ragtrial.evaluation.judge.protocols import (
    classic_prompt,
    classic_schema,
    judge_classic,
    judge_unbiased,
    score_schema,
    scoring_prompt,
)
from ragtrial.evaluation.key_facts import facts_reply_schema
from ragtrial.index.create_community_reports import report_schema
from ragtrial.index.extract_llm_graph import claims_schema, graph_schema
from ragtrial.llm.backend_check import CapitalAnswer
from ragtrial.methods.map_reduce import map_schema
from ragtrial.methods.selection import RouteLabel
from ragtrial.questions.generated_records import list_schema, one_question_schema
from ragtrial.questions.quality import RelevanceRating
from ragtrial.retrieval.entity_graph import QuestionEntities
from ragtrial.retrieval.lightrag import QuestionKeywords

FAST = 0.001  # time scale: a 0.8 s median call takes 0.8 ms
CHUNK = "Ada Lovelace met Charles Babbage in London. The Analytical Engine was built by Babbage."
ASPECTS = ("comprehensiveness", "directness", "empowerment", "relevance")

# Every reply schema the kit passes to `LLM.structured`, by the module that sends it.
STRUCTURED = {
    "index/extract_llm_graph (extraction, gleaning)": graph_schema(("person", "organization"), 10, 200),
    "index/extract_llm_graph (claims)": claims_schema(10, 200),
    "index/create_community_reports": report_schema(5, 400),
    "questions/generated_records (one)": one_question_schema(200),
    "questions/generated_records (list)": list_schema("questions", 3, 200),
    "questions/quality (relevance)": RelevanceRating,
    "methods/map_reduce (map points)": map_schema(5, 300),
    "methods/selection (route)": RouteLabel,
    "retrieval/entity_graph (entities)": QuestionEntities,
    "retrieval/lightrag (keywords)": QuestionKeywords,
    "evaluation/claims": claims_reply_schema(8),
    "evaluation/key_facts": facts_reply_schema(3),
    "evaluation/grounding (support)": SupportVerdict,
    "llm/backend_check": CapitalAnswer,
    "evaluation/judge/protocols (unbiased)": score_schema(ASPECTS),
    "evaluation/judge/protocols (classic)": classic_schema(False),
    "evaluation/judge/protocols (classic, ties)": classic_schema(True),
}
SENDERS = {key.split(" ")[0] for key in STRUCTURED}


def judge_text(schema_name: str) -> str:
    values = {"question": "Who built the Engine?", "answer_1": CHUNK, "answer_2": "Babbage did."}
    if "unbiased" in schema_name:
        return scoring_prompt(ASPECTS).render(**values)[-1]["content"]
    return classic_prompt("ties" in schema_name).render(**values)[-1]["content"]


def test_every_module_that_sends_a_structured_request_is_covered():
    """A new `.structured(` sender must add its schema to STRUCTURED (SampledLLM only passes one on)."""
    found = subprocess.run(
        ["git", "grep", "-l", r"\.structured(", "--", "lib/ragtrial"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
    ).stdout.split()
    modules = {re.sub(r"^lib/ragtrial/|\.py$", "", path) for path in found}
    assert modules - {"evaluation/judge/answers", "llm/client"} <= SENDERS


@pytest.mark.parametrize("name", list(STRUCTURED))
def test_every_structured_request_the_kit_sends_gets_a_reply_its_parser_accepts(name, tmp_path):
    schema = STRUCTURED[name]
    text = judge_text(name) if "judge" in name else f"Read this text and reply in JSON.\n\nText: {CHUNK}"
    with CapableServer(time_scale=FAST) as server:
        llm = make_llm(server.base_url, tmp_path, max_retries=0)
        with llm.ledger.tally() as tally:
            reply = llm.structured(text, schema, stage="coverage")
    assert isinstance(reply, schema)
    assert server.requests == 1  # no repair round: the first reply parsed
    assert tally.totals()["calls"] == 1
    if "extraction" in name:  # names drawn from the chunk
        names = {e.name for e in reply.entities}  # type: ignore[attr-defined]
        assert names and all(n in CHUNK for n in names)


def test_the_judge_replies_follow_the_known_truth_in_both_formats(tmp_path):
    truth = Truth({"Alpha": 3.0, "Beta": -3.0}, spread=0.0, call_noise=0.0, tie_margin=0.5)
    with CapableServer(time_scale=FAST, truth=truth) as server:
        llm = make_llm(server.base_url, tmp_path, max_retries=0)
        for render, schema in ((scoring_prompt(ASPECTS).render, score_schema(ASPECTS)),):
            reply = llm.structured(
                render(question="q", answer_1="Beta says", answer_2="Alpha says"), schema, stage="t"
            )
            assert reply.answer_2 == [5, 5, 5, 5] and reply.answer_1 == [0, 0, 0, 0]  # type: ignore[attr-defined]
        tie = llm.structured(
            classic_prompt(True).render(question="q", answer_1="Alpha one", answer_2="Alpha two"),
            classic_schema(True),
            stage="t",
        )
        assert set(tie.model_dump().values()) == {0}  # equal qualities: a tie where ties are allowed


def test_a_rate_limited_endpoint_s_429s_are_waited_out_and_counted_with_nothing_lost(tmp_path):
    with CapableServerProcess(0.8, 5.0, slots=8, time_scale=0.01, rate_per_s=1.0) as server:
        llm = make_llm(server.base_url, tmp_path, concurrency=8, max_retries=2, timeout_s=10.0)
        texts = [f"Question {i}: what did Ada Lovelace write?" for i in range(30)]
        with llm.ledger.tally() as tally:
            replies = llm.fan_out(lambda t: llm.complete(t, stage="rate"), texts, label="rate")
        stats = server.stats()
    assert len(replies) == 30 and all(replies)
    rows = tally.frame()
    assert (rows["failure"] == "").all()
    assert stats["refused"] > 0
    assert rows["throttled"].sum() == stats["refused"]  # every refusal counted by the kit
    assert stats["requests"] == 30  # each served once: nothing lost, nothing sent twice


def pairs_of(n: int, marker_a: str, marker_b: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "question_id": [f"q{i}" for i in range(n)],
            "question_type": "global",
            "question": [f"What changed in year {i}?" for i in range(n)],
            "method_a": "a",
            "replicate_a": 0,
            "method_b": "b",
            "replicate_b": 0,
            "text_a": [f"{marker_a} answer {i}: the Engine computed tables in London." for i in range(n)],
            "text_b": [f"{marker_b} answer {i}: the Engine computed tables in London." for i in range(n)],
        }
    )


@pytest.mark.parametrize("advantage", [0.6, 0.0], ids=["planted_difference", "planted_null"])
def test_the_unbiased_protocol_recovers_the_planted_truth_and_the_classic_one_shows_the_position_bias(
    advantage, tmp_path
):
    truth = Truth({"Alpha": advantage, "Beta": 0.0}, spread=0.5, position_bias=0.8, position_bonus=1.0)
    pairs = pairs_of(40, "Alpha", "Beta")
    with CapableServer(time_scale=FAST, slots=16, truth=truth) as server:
        llm = make_llm(server.base_url, tmp_path, concurrency=16, max_retries=0)
        unbiased = judge_unbiased(llm, pairs, ASPECTS, trials=3, repeats=1, max_tokens=64, temperature=0.0)
        classic = judge_classic(llm, pairs, max_tokens=64, temperature=0.0, positions=("AB", "BA"))
    assert unbiased.failures.empty and classic.failures.empty
    summary = aggregate_unbiased(unbiased, resamples=500).summary.iloc[0]
    expected = true_relative_win_rate(truth, list(pairs["text_a"]), list(pairs["text_b"]))
    assert summary["rwr_ci_low"] <= expected <= summary["rwr_ci_high"]
    if advantage:
        assert summary["rwr_ci_low"] > 0 and summary["p_holm"] < 0.05  # the planted advantage, named
    else:
        assert summary["p_holm"] >= 0.05  # the null: no claim
    overall = classic_summary(classic, resamples=200).query("aspect == 'overall'")
    first_wins = overall.set_index("position")["first_slot_win_rate"]
    if not advantage:  # equal means: the first-shown answer wins about position_bias of the time
        assert (first_wins > 0.6).all()


def test_an_answer_names_the_planted_markers_its_prompt_shows_and_no_other(tmp_path):
    truth = Truth({"(community_report)": 1.0, "(relation)": 0.0})
    with CapableServer(time_scale=FAST, truth=truth) as server:
        llm = make_llm(server.base_url, tmp_path, max_retries=0)
        shown = llm.complete("[1] (community_report) Babbage's circle.\n\nQuestion: who?", stage="t").text
        plain = llm.complete("[1] (chunk) Babbage's circle.\n\nQuestion: who?", stage="t").text
    assert shown.startswith("(community_report) ") and "(relation)" not in shown
    assert not any(marker in plain for marker in truth.quality)
