"""Question generation (summary, persona, graph levels with chunk summaries), relevance ratings
and the LLM entity linker fan out up to llm.concurrency: the same questions, ratings, mentions,
failure rows and cache keys at any concurrency, and the requests really overlap.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

import pandas as pd
from conftest import make_llm
from scripted_server import InFlight
from test_questions import first_user_turn, small_index, structured_reply  # noqa: F401 (a fixture)

from ragtrial.config.questions import QuestionsSettings
from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.llm.hashing_embedder import HashingEmbedder
from ragtrial.questions.quality import entity_mentions, make_entity_linker, rate_relevance
from ragtrial.questions.run_generators import generate_questions
from ragtrial.retrieval.base import RetrieverParts

CFG = QuestionsSettings(
    generators=["summary", "persona", "graph"],
    summary_questions=8,
    summary_per_call=2,
    personas=3,
    tasks_per_persona=2,
    questions_per_task=2,
    per_level=6,
    min_hops=3,
    temperature=None,
)


def stage_of(body: dict) -> str:
    """Which generator or rating a request belongs to, read from its schema and prompt."""
    if "response_format" not in body:
        return "summarize_chunks"
    title = body["response_format"]["schema"]["title"]
    named = {
        "OneQuestion": "graph",
        "RelevanceRating": "rate_relevance",
        "QuestionEntities": "question_entities",
    }
    if title in named:
        return named[title]
    return "summary" if first_user_turn(body).startswith("Description of a data set") else "persona"


def reply(body: dict) -> str:
    """`structured_reply`, and for the LLM linker the capitalized words of the question."""
    if stage_of(body) == "question_entities":
        question = first_user_turn(body).rsplit("Question:", 1)[-1]
        return json.dumps({"entities": sorted(set(re.findall(r"\b[A-Z][a-z]+\b", question)))[:4]})
    return structured_reply(body)


def model(body: dict) -> str:
    """`reply`, but about one request in five never parses (nor does its repair round),
    and about one chunk summary in four comes back blank: failures that depend only on the request.
    """
    asked = f"{first_user_turn(body)} {body.get('seed')}"  # the seed tells replicates apart
    bucket = int(hashlib.md5(asked.encode()).hexdigest(), 16)
    if stage_of(body) == "summarize_chunks":
        return "" if bucket % 4 == 0 else reply(body)
    return "not json" if bucket % 5 == 0 else reply(body)


def run(scripted, folder: Path, index, concurrency: int):
    llm = make_llm(scripted.base_url, folder, concurrency=concurrency, max_retries=0)
    generated = generate_questions(llm, index, [], CFG)
    questions = generated.questions
    contexts = {qid: f"Context retrieved for {qid}." for qid in questions["question_id"]}
    ratings, rating_failures = rate_relevance(llm, questions, contexts, max_tokens=24)
    linker = make_entity_linker(index, RetrieverParts(HashingEmbedder(), llm), RetrievalSettings(), "llm")
    mentions = entity_mentions(questions, linker, "llm")
    with sqlite3.connect(folder / "cache.sqlite") as conn:
        keys = {key for (key,) in conn.execute("SELECT key FROM completions")}
    return generated, (ratings, rating_failures), mentions, keys


def test_questions_and_ratings_are_the_same_at_any_concurrency(scripted, tmp_path, small_index) -> None:  # noqa: F811
    index, _ = small_index
    scripted.default_reply = model
    (tmp_path / "one").mkdir()
    (tmp_path / "eight").mkdir()
    one = run(scripted, tmp_path / "one", index, 1)
    # held a little, so that units making the same request (the summary calls' replicates return
    # the same questions) are in flight together
    scripted.default_reply = InFlight(model, hold_s=0.05, kind_of=stage_of)
    eight = run(scripted, tmp_path / "eight", index, 8)
    generated, (ratings, rating_failures), (mentions, mention_failures), _ = one
    # every generator and level produced questions, and several stages failed somewhere
    q = generated.questions
    assert set(q["generator"]) == {"summary", "persona", "graph"} and set(q["level"]) >= {
        "node",
        "edge",
        "subgraph",
    }
    assert {"questions_node", "summarize_chunks"} <= set(generated.failures["stage"]), generated.failures
    assert len(ratings) > 10 and len(rating_failures) > 0
    assert len(mentions) > 10 and len(mention_failures) > 0

    for a, b in [
        (generated.questions, eight[0].questions),
        (generated.failures, eight[0].failures),
        *zip(one[1], eight[1], strict=True),
        *zip(one[2], eight[2], strict=True),
    ]:
        pd.testing.assert_frame_equal(a, b)
    assert one[3] == eight[3]


def test_question_stages_send_their_calls_concurrently(scripted, tmp_path, small_index) -> None:  # noqa: F811
    index, _ = small_index
    recorder = InFlight(reply, hold_s=0.1, kind_of=stage_of)
    scripted.default_reply = recorder
    run(scripted, tmp_path, index, 8)
    for stage in ("summary", "persona", "graph", "summarize_chunks", "rate_relevance", "question_entities"):
        assert recorder.most[stage] > 1, (stage, dict(recorder.most))
