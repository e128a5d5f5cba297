"""Methods against the scripted server: one answer prompt for all, provenance, map-reduce, routing,
failures recorded instead of scored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pandas as pd
import pytest
from conftest import make_llm

from ragtrial.config import Settings
from ragtrial.index.embed_index import embed_index
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.client import LLM
from ragtrial.llm.hashing_embedder import HashingEmbedder
from ragtrial.llm.tokens import count_tokens
from ragtrial.methods.base import NO_DATA_ANSWER, Generator
from ragtrial.methods.integration import IntegrationMethod
from ragtrial.methods.map_reduce import MapReduceMethod
from ragtrial.methods.registry import make_methods
from ragtrial.methods.retrieval_method import RetrievalMethod
from ragtrial.methods.selection import SelectionMethod
from ragtrial.prompts import load_prompt
from ragtrial.records import Question
from ragtrial.retrieval.base import ContextItem, Retrieval
from ragtrial.retrieval.packing import EMPTY_CONTEXT, pack_context

QUESTION = Question(question_id="q1", question="Where was Ada Lovelace born?", answers=["London"])
DOC_OF = {"c1": "d1", "c2": "d2", "c3": "d3"}


def chunk(cid: str, text: str, retriever: str = "vector") -> ContextItem:
    return ContextItem(kind="chunk", text=text, score=1.0, retriever=retriever, chunk_ids=[cid])


@dataclass
class Fixed:
    """A retriever that returns the same ranked items for every question."""

    name: str
    items: list[ContextItem]
    fallback: str = ""

    def retrieve(self, question: str, k: int) -> Retrieval:
        return Retrieval(self.items[:k], self.fallback, {"asked": question})


RAG = Fixed("vector", [chunk("c1", "Ada Lovelace was born in London."), chunk("c2", "London is a city.")])
GRAPH = Fixed(
    "graph_walk",
    [
        ContextItem(
            kind="entity",
            text="Ada Lovelace: a mathematician",
            score=0.9,
            retriever="graph_walk",
            entity_ids=["e1"],
            chunk_ids=["c3"],
        ),
        chunk("c3", "Lovelace worked with Babbage.", "graph_walk"),
    ],
    fallback="no seed",
)


def user_text(request: dict) -> str:
    return request["body"]["messages"][-1]["content"]


def answer_requests(server) -> list[str]:
    return [user_text(r) for r in server.chat_requests() if "\nAnswer:" in user_text(r)]


@pytest.fixture
def llm(scripted, tmp_path) -> LLM:
    def reply(body: dict) -> str:
        text = body["messages"][-1]["content"]
        if "sort questions" in body["messages"][0]["content"]:
            asked = text.rsplit("Question:", 1)[-1]  # the few-shot examples come before it
            return json.dumps({"label": "reasoning" if "founder" in asked else "fact"})
        if "Reports:" in text:
            # one helpful and one useless point per batch, scored by what the batch holds
            score = 90 if "London" in text else 40
            return json.dumps(
                {
                    "points": [
                        {"description": f"point from {text[10:30]!r}", "score": score},
                        {"description": "nothing relevant", "score": 0},
                    ]
                }
            )
        return "London\nQuestion: and then the model keeps going"

    scripted.default_reply = reply
    return make_llm(scripted.base_url, tmp_path, max_retries=0)


def generator(llm: LLM) -> Generator:
    return Generator(llm, load_prompt("answer"), max_tokens=48, first_line_only=True)


def retrieval_method(llm: LLM, name: str, retriever, budget: int = 1000) -> RetrievalMethod:
    return RetrievalMethod(name, generator(llm), llm.ledger, DOC_OF, retriever, k=5, budget=budget)


def test_every_method_shows_the_same_prompt_and_only_the_context_differs(llm, scripted):
    rag, graph = retrieval_method(llm, "naive_rag", RAG), retrieval_method(llm, "graph_walk", GRAPH)
    methods = [
        retrieval_method(llm, "closed_book", None),
        rag,
        graph,
        IntegrationMethod("integration", [rag, graph]),
        SelectionMethod("selection", {"fact": rag, "reasoning": graph}, llm, load_prompt("route_question")),
    ]
    answers = [m.answer(QUESTION) for m in methods]
    assert [a.text for a in answers] == ["London"] * 5  # first line only
    prompts = answer_requests(scripted)
    assert len(prompts) == 4  # selection routed to naive_rag sent the identical request: a cache hit
    template = load_prompt("answer").template
    head, tail = (
        template.split("$context")[0],
        template.split("$context")[1].replace("$question", QUESTION.question),
    )
    assert all(p.startswith(head) and p.endswith(tail) for p in prompts)
    assert all(
        r["body"]["stop"] == ["\n"] for r in scripted.chat_requests() if "response_format" not in r["body"]
    )
    closed, naive, walk, integration, selection = answers
    assert closed.context == [] and closed.context_tokens == {} and EMPTY_CONTEXT in prompts[0]
    assert naive.doc_ids == ["d1", "d2"] and naive.context_tokens == {
        "chunk": sum(count_tokens(i.text) for i in RAG.items)
    }
    assert (
        walk.fallback == "no seed"
        and walk.doc_ids == ["d3"]
        and set(walk.context_tokens) == {"entity", "chunk"}
    )
    assert [i.text for i in integration.context] == [i.text for i in RAG.items + GRAPH.items]
    assert integration.notes["naive_rag"] == {"asked": QUESTION.question}
    assert selection.notes["route"] == "fact" and selection.notes["routed_to"] == "naive_rag"
    assert selection.calls == 2 and selection.cached_calls == 1 and selection.doc_ids == ["d1", "d2"]
    for a in answers:  # calls and tokens come from the ledger rows of the question's calls
        assert a.failure == "" and a.context_ready and a.latency_s > 0 and a.prompt_tokens > 0
    assert sum(a.calls for a in answers) == len(llm.ledger.frame()) == len(scripted.chat_requests()) + 1


def test_a_short_answer_that_opens_with_a_line_break_is_asked_again_without_the_stop(scripted, tmp_path):
    # llama.cpp's reply when the first token is the stop sequence: no text, one completion token
    stopped = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ""}}
    only_the_stop = {"choices": [stopped], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
    scripted.script.extend([("body", 200, only_the_stop), ("text", "\nLondon\nQuestion: and on")])
    llm = make_llm(scripted.base_url, tmp_path, max_retries=0)
    answer = retrieval_method(llm, "naive_rag", RAG).answer(QUESTION)
    assert answer.text == "London" and answer.calls == 2 and answer.failure == ""
    assert [r["body"].get("stop") for r in scripted.chat_requests()] == [["\n"], None]


def test_selection_routes_by_the_routers_label(llm, scripted):
    rag, graph = retrieval_method(llm, "naive_rag", RAG), retrieval_method(llm, "graph_walk", GRAPH)
    selection = SelectionMethod(
        "selection", {"fact": rag, "reasoning": graph}, llm, load_prompt("route_question")
    )
    multi = Question(
        question_id="q2", question="In which city was the founder of Acme born?", answers=["Rome"]
    )
    answer = selection.answer(multi)
    assert (answer.notes["route"], answer.notes["routed_to"]) == ("reasoning", "graph_walk")
    assert answer.doc_ids == ["d3"] and answer.fallback == "no seed"
    route_prompt = user_text(scripted.chat_requests()[0])
    assert route_prompt.count('{"label": "fact"}') >= 2 and route_prompt.endswith(multi.question)  # few-shot


def test_global_search_drops_zero_scores_sorts_and_respects_the_reduce_budget(llm, scripted):
    reports = [
        ContextItem(
            kind="community_report",
            text=t,
            score=1.0,
            retriever="global_search",
            community_ids=[f"r{i}"],
            chunk_ids=[f"c{i}"],
        )
        for i, t in enumerate(
            [
                "Ada Lovelace was born in London. " * 20,
                "Babbage built engines. " * 20,
                "Paris is in France. " * 20,
            ]
        )
    ]
    one_point = count_tokens("point from 'xxxxxxxxxxxxxxxxxxxx'")
    method = global_search(
        llm, reports, map_budget=130, map_max_tokens=128, reduce_budget=one_point + 3, seed=0
    )
    assert [len(b) for b in method.batches] == [1, 1, 1]  # each report alone fits the map budget
    answer = method.answer(QUESTION)
    assert answer.notes == {
        "map_batches": 3,
        "map_failed": 0,
        "map_too_long": 0,
        "points": 6,
        "points_zero": 3,
        "points_at_cap": 0,
    }
    assert answer.calls == 4 and answer.failure == ""
    assert len(answer.context) == 1 and answer.context[0].score == 90  # best point only: the budget holds one
    assert all(item.kind == "map_answer" and item.score > 0 for item in answer.context)
    assert answer.context[0].community_ids == ["r0"]  # provenance: the batch the point came from
    assert "nothing relevant" not in answer_requests(scripted)[0]


def global_search(llm, reports, **budgets) -> MapReduceMethod:
    """Global search over `reports` with the shared test generator, two points per map reply."""
    return MapReduceMethod(
        "global_search",
        generator(llm),
        llm.ledger,
        DOC_OF,
        reports,
        llm,
        reduce_prompt=None,
        entity_names={},
        **{"point_max_chars": 160, "max_points": 2, **budgets},
    )


def test_a_map_point_over_its_length_cap_is_counted_as_too_long_and_no_cap_keeps_it(llm, scripted):
    reports = [ContextItem(kind="community_report", text="Ada was born in London.", score=1.0, retriever="x")]
    point = "Ada Lovelace, the analyst of the Analytical Engine, was born in London in 1815. " * 3
    scripted.default_reply = lambda body: (
        json.dumps({"points": [{"description": point, "score": 80}]})
        if "response_format" in body
        else "London."
    )
    budgets = {"map_budget": 500, "map_max_tokens": 256, "reduce_budget": 500, "seed": 0}
    capped = global_search(llm, reports, point_max_chars=160, **budgets).answer(QUESTION)
    assert capped.failure == "too_long" and capped.notes["map_too_long"] == 1
    assert {f["kind"] for f in capped.failures} == {"too_long"}  # the map batch and the lost answer
    uncapped = global_search(llm, reports, point_max_chars=None, **budgets).answer(QUESTION)
    assert (
        uncapped.failure == "" and uncapped.context[0].text == point and uncapped.notes["map_too_long"] == 0
    )
    at_cap = global_search(llm, reports, point_max_chars=len(point), **budgets).answer(QUESTION)
    assert at_cap.failure == "" and at_cap.notes["points_at_cap"] == 1


def test_map_failures_are_recorded_and_an_all_zero_map_declines(llm, scripted):
    reports = [
        ContextItem(kind="community_report", text=t, score=1.0, retriever="global_search")
        for t in ["Ada was born in London.", "Babbage built engines."]
    ]
    method = global_search(llm, reports, map_budget=8, map_max_tokens=64, reduce_budget=500, seed=1)
    scripted.script.extend([("text", "not json"), ("text", "still not json")])  # first batch: reply + repair
    answer = method.answer(QUESTION)
    assert answer.failure == "" and answer.notes["map_failed"] == 1
    assert answer.failures[0]["stage"] == "map" and answer.failures[0]["kind"] == "parse"
    scripted.script.extend([("text", "no")] * 4)  # every batch fails: no answer at all, never an empty text
    lost = method.answer(Question(question_id="q3", question="Who?", answers=["x"]))
    assert lost.failure == "parse" and lost.text == "" and lost.notes["map_failed"] == 2
    scripted.default_reply = lambda body: json.dumps({"points": [{"description": "n/a", "score": 0}]})
    declined = method.answer(Question(question_id="q4", question="What?", answers=["x"]))
    assert declined.text == NO_DATA_ANSWER and declined.fallback and declined.calls == 2


def test_a_failed_generation_is_a_recorded_failure_not_an_empty_answer(llm, scripted):
    scripted.script.append(("status", 400))
    answer = retrieval_method(llm, "naive_rag", RAG).answer(QUESTION)
    assert answer.failure == "http_400" and answer.text == ""
    assert answer.failures == [
        {"stage": "answer", "kind": "http_400", "detail": answer.failures[0]["detail"]}
    ]
    assert answer.context_ready and answer.doc_ids == ["d1", "d2"]  # retrieval still counts
    scripted.script.append(("text", "   "))  # a blank reply is a failed call (issue 12), not an answer
    blank = retrieval_method(llm, "naive_rag", RAG).answer(QUESTION)
    assert blank.failure == "empty_reply" and blank.text == "" and blank.calls == 1


def test_pack_context_stops_at_the_budget_and_truncates_an_oversized_first_item():
    items = [
        chunk("c1", "one two three four five"),
        chunk("c2", "six seven"),
        chunk("c1", "one two three four five"),
        chunk("c3", "eight"),
    ]
    kept, tokens = pack_context(items, 7)
    assert [i.text for i in kept] == ["one two three four five", "six seven"] and tokens == {"chunk": 7}
    kept, tokens = pack_context(items, 3)
    assert [i.text for i in kept] == ["one two three"] and tokens == {"chunk": 3}
    kept, _ = pack_context(items, 100)
    assert len(kept) == 3  # the repeated chunk is shown once


@dataclass
class Run:
    """A ModelContext: what building methods needs of a run."""

    settings: Settings
    llm: LLM
    embedder: HashingEmbedder = field(default_factory=HashingEmbedder)
    run_id: str = "test-run"

    @property
    def ledger(self):
        return self.llm.ledger


def passages_index(n: int) -> GraphIndex:
    texts = [f"Passage {i} says that Ada Lovelace was born in London." for i in range(n)]
    chunks = pd.DataFrame(
        {
            "chunk_id": [f"c{i}" for i in range(n)],
            "doc_id": [f"d{i}" for i in range(n)],
            "position": 0,
            "text": texts,
            "n_tokens": [count_tokens(t) for t in texts],
        }
    )
    return embed_index(GraphIndex(chunks=chunks), HashingEmbedder().embed)


def test_naive_rag_can_fill_the_context_budget_instead_of_showing_top_k(llm):
    index = passages_index(8)
    per_chunk = count_tokens(index.chunks["text"][0])
    budget = 5 * per_chunk  # room for 5 chunks; k = 2
    shown = {}
    for fills in (False, True):
        settings = Settings(retrieval={"k": 2, "naive_rag_fills_budget": fills})
        answer_settings = settings.qa.model_copy(update={"context_budget": budget})
        methods, _ = make_methods(["naive_rag", "hybrid"], index, Run(settings, llm), answer_settings)
        shown[fills] = {m.name: len(m.answer(QUESTION).context) for m in methods}
    assert shown[False] == {"naive_rag": 2, "hybrid": 2}
    # The GraphRAG paper's SS: chunks in rank order until the budget is full; other methods keep k.
    assert shown[True] == {"naive_rag": 5, "hybrid": 2}


def test_whole_answer_types_keep_the_lines_that_state_a_conflict(scripted, tmp_path):
    scripted.default_reply = lambda body: "Tucson\nThe Courier says Phoenix instead."
    llm = make_llm(scripted.base_url, tmp_path, max_retries=0)
    contradictory = Question(
        question_id="c1",
        question="Where is Acme based?",
        answers=["Tucson", "Phoenix"],
        question_type="contradictory",
    )
    single_hop = contradictory.model_copy(update={"question_id": "s1", "question_type": "single_hop"})
    cut = Generator(llm, load_prompt("answer"), max_tokens=48, first_line_only=True)
    whole = Generator(
        llm, load_prompt("answer"), 48, first_line_only=True, whole_answer_types=frozenset({"contradictory"})
    )
    answer = RetrievalMethod("naive_rag", whole, llm.ledger, DOC_OF, RAG, k=5, budget=1000).answer
    assert answer(contradictory).text == "Tucson\nThe Courier says Phoenix instead."
    assert answer(single_hop).text == "Tucson"  # other types keep the first line
    assert (
        RetrievalMethod("naive_rag", cut, llm.ledger, DOC_OF, RAG, k=5, budget=1000)
        .answer(contradictory)
        .text
        == "Tucson"
    )


def test_an_uncapped_map_keeps_every_point_of_a_reply_for_the_reduce_prompt(llm, scripted):
    # GraphRAG bounds a map reply by tokens only: methods.map_max_points null keeps all seven points
    points = [f"Point number {i} about Ada Lovelace." for i in range(7)]
    scripted.default_reply = lambda body: (
        json.dumps({"points": [{"description": p, "score": 90 - i} for i, p in enumerate(points)]})
        if "response_format" in body
        else "London."
    )
    reports = [ContextItem(kind="community_report", text="Ada was born in London.", score=1.0, retriever="x")]
    budgets = {"map_budget": 500, "map_max_tokens": 512, "reduce_budget": 2000, "seed": 0}
    answer = global_search(llm, reports, **{**budgets, "max_points": None}).answer(QUESTION)
    map_request, reduce_request = scripted.chat_requests()
    assert "at most" not in user_text(map_request)  # the prompt asks for every helpful point
    assert "maxItems" not in json.dumps(map_request["body"]["response_format"])
    assert answer.notes["points"] == 7 and len(answer.context) == 7
    assert all(p in user_text(reduce_request) for p in points)
