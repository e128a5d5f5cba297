"""Answering, length alignment, judging and claim extraction at llm.concurrency 1 and 8: the same
tables and the same cache keys, each unit's cost its own, and more than one request in flight.

The scripted server's replies depend only on the request (a hash of its text), never on the order
requests arrive in, so any difference between the two runs is the kit's.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from conftest import make_llm
from scripted_server import InFlight

from ragtrial.evaluation.claims import extract_claims
from ragtrial.evaluation.judge.answers import answer_questions
from ragtrial.evaluation.judge.pairs import align_lengths, llm_appender, make_pairs
from ragtrial.evaluation.judge.protocols import POSITIONS, judge_classic, judge_unbiased
from ragtrial.evaluation.run_methods import run_methods
from ragtrial.llm.client import LLM
from ragtrial.llm.ledger import Tally
from ragtrial.methods.base import Generator
from ragtrial.methods.map_reduce import MapReduceMethod
from ragtrial.methods.retrieval_method import RetrievalMethod
from ragtrial.prompts import load_prompt
from ragtrial.records import Question
from ragtrial.retrieval.base import ContextItem, Retrieval

ASPECTS = ("comprehensiveness", "empowerment", "directness")
WORDS = "river stone market bridge harvest lantern council archive ferry orchard".split()
# the global search of this question gets no valid map reply: an answer lost to a parse failure
POISON = "Which ledger was poisoned?"
QUESTIONS = [
    Question(question_id=f"q{i}", question=text)
    for i, text in enumerate(
        ["Who built the bridge?", "What did the council decide?", POISON, "Why did the ferry stop?"]
    )
]


def digest(*parts: object) -> int:
    return int(hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:12], 16)


def words(n: int, h: int) -> str:
    draw = random.Random(h)
    return " ".join(draw.choice(WORDS) for _ in range(n))


def reply(body: dict) -> str:
    """A reply fixed by the request: the first user turn (so a repair round is refused the same
    way), the seed and the schema asked for; some judge and claim calls fail to parse.
    """
    messages = body["messages"]
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    user = next(m["content"] for m in messages if m["role"] == "user")
    schema = body.get("response_format", {}).get("schema", {}).get("title", "")
    h = digest(system, user, body.get("seed"), body.get("temperature"), schema)
    if schema == "MapReply":
        if "poisoned" in user:
            return "not json"
        points = [{"description": words(4, h + i), "score": (h >> i) % 100} for i in range(2)]
        return json.dumps({"points": points})
    if schema == "ClassicVerdict":
        return "not json" if h % 5 == 0 else json.dumps({a: 1 + (h >> i) % 2 for i, a in enumerate(AXES)})
    if schema == "AspectScores":
        scores = [[(h >> (3 * i + k)) % 6 for i in range(len(ASPECTS))] for k in (0, 1)]
        return "not json" if h % 5 == 0 else json.dumps({"answer_1": scores[0], "answer_2": scores[1]})
    if schema == "AnswerClaims":
        return "not json" if h % 4 == 0 else json.dumps({"claims": [words(3, h + i) for i in range(h % 4)]})
    if "Write the answer in about" in system:  # a regeneration: near the target, often short of it
        target = int(system.split("Write the answer in about ", 1)[1].split()[0])
        return words(max(1, target - h % 5), h)
    return words(4 + h % 25, h)


AXES = ("comprehensiveness", "diversity", "empowerment", "directness", "overall")


@dataclass
class Fixed:
    """A retriever that shows the same two chunks for every question."""

    name: str = "vector"

    def retrieve(self, question: str, k: int) -> Retrieval:
        items = [
            ContextItem(
                kind="chunk", text=f"{WORDS[i]} notes", score=1.0, retriever=self.name, chunk_ids=[f"c{i}"]
            )
            for i in range(2)
        ]
        return Retrieval(items[:k], "", {})


def methods(llm: LLM) -> list:
    generator = Generator(llm, load_prompt("summarize_query"), max_tokens=96, first_line_only=False)
    reports = [
        ContextItem(kind="community_report", text=words(12, i), score=1.0, retriever="global_search")
        for i in range(6)
    ]
    return [
        RetrievalMethod(
            "naive_rag", generator, llm.ledger, {"c0": "d0", "c1": "d1"}, Fixed(), k=2, budget=500
        ),
        MapReduceMethod(
            "global_search",
            generator,
            llm.ledger,
            {},
            reports,
            llm,
            map_budget=40,  # a few reports per batch: several map calls per answer
            map_max_tokens=128,
            max_points=2,
            point_max_chars=160,
            reduce_budget=500,
            reduce_prompt=None,
            seed=3,
            entity_names={},
        ),
    ]


def cost_sums(frame: pd.DataFrame) -> dict[str, int]:
    columns = ["calls", "cached_calls", "prompt_tokens", "completion_tokens"]
    return {c: int(frame[c].sum()) for c in columns}


def stage(llm: LLM, work):
    """`work()` and the tally of every call it made."""
    with llm.ledger.tally() as tally:
        return work(), tally


def run_all(
    scripted, tmp_path: Path, concurrency: int, replies=reply
) -> tuple[dict[str, pd.DataFrame], dict[str, Tally], LLM]:
    """Every stage of a judge run and a claims run, at `concurrency`, with its own cache and ledger;
    returns each stage's tables and the tally of its calls.
    """
    scripted.default_reply = replies
    llm = make_llm(scripted.base_url, tmp_path, concurrency=concurrency, max_retries=0)
    runners = methods(llm)
    tables, tallies = {}, {}
    tables["answers"], tallies["answers"] = stage(llm, lambda: run_methods(runners, QUESTIONS))
    answered, tallies["judge answers"] = stage(
        llm, lambda: answer_questions({(m.name, 0): m for m in runners}, QUESTIONS)
    )
    tables["judge answers"] = answered.frame
    questions = pd.DataFrame(
        {"question_id": q.question_id, "question": q.question, "question_type": q.question_type}
        for q in QUESTIONS
    )
    ok = answered.frame[answered.frame["failure"] == ""]
    pairs, _ = make_pairs(questions, ok, [("naive_rag", "global_search")])
    (aligned, log), tallies["alignment"] = stage(
        llm,
        lambda: align_lengths(
            pairs, answered.regenerate, llm_appender(llm, 0.7), tolerance=2, max_attempts=2, llm=llm
        ),
    )
    tables["aligned"], tables["alignment log"] = aligned, log
    classic, tallies["classic"] = stage(
        llm,
        lambda: judge_classic(llm, pairs, max_tokens=48, temperature=0.7, positions=POSITIONS, repeats=2),
    )
    unbiased, tallies["unbiased"] = stage(
        llm,
        lambda: judge_unbiased(llm, aligned, ASPECTS, trials=2, repeats=2, max_tokens=60, temperature=0.7),
    )
    for name, run in (("classic", classic), ("unbiased", unbiased)):
        tables[f"{name} judgments"], tables[f"{name} failures"] = run.judgments, run.failures
        tables[f"{name} costs"] = run.costs
    tables["claim sets"], tallies["claims"] = stage(
        llm, lambda: extract_claims(tables["answers"], llm, max_tokens=64, max_claims=4)
    )
    return tables, tallies, llm


def cache_keys(tmp_path: Path) -> set[str]:
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        return {key for (key,) in conn.execute("SELECT key FROM completions")}


def comparable(frame: pd.DataFrame) -> pd.DataFrame:
    """A table without its wall-clock column (latency is the one thing allowed to differ)."""
    return frame.drop(columns=["latency_s"], errors="ignore").reset_index(drop=True)


def test_every_stage_gives_the_same_tables_and_cache_keys_at_concurrency_1_and_8(scripted, tmp_path):
    one, _, _ = run_all(scripted, tmp_path / "c1", 1)
    eight, _, llm = run_all(scripted, tmp_path / "c8", 8)
    assert llm.settings.in_flight == 8
    for name in one:
        pd.testing.assert_frame_equal(comparable(one[name]), comparable(eight[name]), obj=name)
    assert cache_keys(tmp_path / "c1") == cache_keys(tmp_path / "c8")
    # failures are among what is compared: a lost answer, failed judge calls and extractions
    answers = one["answers"].set_index(["question_id", "method"])
    assert answers.loc[("q2", "global_search"), "failure"] == "parse"
    assert answers["failure"].eq("").sum() == len(answers) - 1
    assert not one["classic failures"].empty and not one["unbiased failures"].empty
    assert (one["claim sets"]["stage"] == "claim_extraction").any()
    assert (one["alignment log"]["regenerations"] > 0).any()


def test_each_answer_judgment_pair_and_extraction_has_exactly_its_own_calls(scripted, tmp_path):
    tables, tallies, llm = run_all(scripted, tmp_path, 8)
    per_unit = {
        "answers": tables["answers"],
        "judge answers": tables["judge answers"],
        "alignment": tables["alignment log"],
        "classic": tables["classic costs"],
        "unbiased": tables["unbiased costs"],
        "claims": tables["claim sets"],
    }
    for name, frame in per_unit.items():
        assert cost_sums(frame) == tallies[name].totals(), name  # no call counted twice, none lost
        assert tallies[name].totals()["calls"] > 0, name
    ledger = llm.ledger.frame()
    assert len(ledger[ledger["kind"] != "embedding"]) == sum(t.totals()["calls"] for t in tallies.values())
    # a judge call's cost row exists for every call, failed or not; a failed one still cost tokens
    classic = tables["classic costs"]
    assert len(classic) == len(POSITIONS) * 2 * len(tables["alignment log"])
    assert classic["failed"].sum() == len(tables["classic failures"])
    assert (classic.loc[classic["failed"], "prompt_tokens"] > 0).all()
    # a map-reduce answer counts its map calls and its reduce call, and nothing of its neighbours
    answers = tables["answers"].set_index(["question_id", "method"])
    batches = json.loads(answers.loc[("q0", "global_search"), "notes"])["map_batches"]
    assert batches > 1 and answers.loc[("q0", "global_search"), "calls"] == batches + 1
    assert (answers.xs("naive_rag", level="method")["calls"] == 1).all()


def test_at_concurrency_8_the_endpoint_sees_more_than_one_request_in_flight_in_every_stage(
    scripted, tmp_path
):
    # each request held long enough for the other units' requests to arrive meanwhile
    slow = InFlight(
        reply, 0.2, lambda body: body.get("response_format", {}).get("schema", {}).get("title", "text")
    )
    most = slow.most

    scripted.default_reply = slow
    # inside one map-reduce answer, its map batches are asked concurrently
    llm = make_llm(scripted.base_url, tmp_path / "one", concurrency=8, max_retries=0)
    answer = methods(llm)[1].answer(QUESTIONS[0])
    assert answer.failure == "" and most["MapReply"] > 1
    # and every stage has several of its calls in flight at once
    most.clear()
    run_all(scripted, tmp_path / "stages", 8, slow)
    # text: answers and regenerations; MapReply: map steps; the judges; claim extraction
    assert set(most) == {"text", "MapReply", "ClassicVerdict", "AspectScores", "AnswerClaims"}
    assert all(n > 1 for n in most.values()), most


@pytest.mark.fault
def test_two_identical_requests_in_flight_at_once_are_sent_once_and_give_one_reply(scripted, tmp_path):
    replies = itertools.count()

    def slow(body: dict) -> str:
        time.sleep(0.2)  # both extractions are under way before the first reply arrives
        return json.dumps({"claims": [words(3, next(replies))]})  # as sampling would: each reply new

    scripted.default_reply = slow
    llm = make_llm(scripted.base_url, tmp_path, concurrency=8, max_retries=0)
    same = words(12, 1)
    answers = pd.DataFrame({"question_id": ["q0", "q1"], "method": ["a", "b"], "text": [same, same]})
    sets = extract_claims(answers, llm, max_tokens=64, max_claims=4)
    first, second = sets.drop(columns=["answer_id", "question_id", "method", "cached_calls"]).to_dict(
        "records"
    )
    assert first == second  # one reply for both
    assert sorted(sets["cached_calls"]) == [0, 1]  # which one waited is not fixed; one of them did
    assert sorted(llm.ledger.frame()["cached"].astype(bool)) == [False, True]  # paid once
