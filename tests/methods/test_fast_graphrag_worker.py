"""fast-graphrag 0.0.5's worker in its own environment, against the scripted OpenAI-compatible server
(its replies parsed by fast-graphrag's own instructor models, chosen by the prompt each request sends).
"""

from __future__ import annotations

import json
import random
import re
import time

import pytest
from conftest import make_llm
from scripted_server import ScriptedServer

from ragtrial.config.llm import EmbeddingSettings
from ragtrial.llm.embedder import Embedder
from ragtrial.llm.proxy import ModelProxy
from ragtrial.methods.upstream.boundary import UpstreamError, Worker
from ragtrial.methods.upstream.environments import SystemNotInstalled, python_for

# Every test here shares a module worker of the real system, whose teardown may start it once more
# (shutdown): the whole module is in the slow tier.
# one pytest worker runs the module: one worker and one index for every test, built once
pytestmark = [pytest.mark.usefixtures("upstream_systems"), pytest.mark.xdist_group("fast_graphrag_worker")]

DOCUMENTS = [
    {"id": "d1", "title": "Acme", "text": "Alice founded Acme in Paris. Acme makes rockets."},
    {"id": "d2", "title": "Berlin", "text": "Bob works for Acme in Berlin. Bob is Alice's brother."},
]
# What fast-graphrag's extraction prompt gets back for each document (its TGraph JSON).
GRAPHS = {
    "Alice founded Acme": {
        "entities": [
            {"name": "Alice", "type": "person", "desc": "Founder of Acme"},
            {"name": "Acme", "type": "organization", "desc": "A rocket maker"},
            {"name": "Paris", "type": "place", "desc": "City where Acme was founded"},
        ],
        "relationships": [
            {"source": "Alice", "target": "Acme", "desc": "Alice founded Acme"},
            {"source": "Acme", "target": "Paris", "desc": "Acme was founded in Paris"},
        ],
        "other_relationships": [],
    },
    "Bob works for Acme": {
        "entities": [
            {"name": "Bob", "type": "person", "desc": "Works for Acme; Alice's brother"},
            {"name": "Acme", "type": "organization", "desc": "Employs Bob"},
            {"name": "Berlin", "type": "place", "desc": "City where Bob works"},
        ],
        "relationships": [
            {"source": "Bob", "target": "Acme", "desc": "Bob works for Acme"},
            {"source": "Bob", "target": "Alice", "desc": "Bob is Alice's brother"},
            {"source": "Bob", "target": "Berlin", "desc": "Bob works in Berlin"},
        ],
        "other_relationships": [],
    },
}
ANSWER = "Alice founded Acme."


def prompt_of(body: dict) -> str:
    """A chat request's turns as one text."""
    return "\n".join(message["content"] for message in body["messages"])


def fast_graphrag_reply(body: dict) -> str:
    """The JSON fast-graphrag's step expects, told apart by its prompt."""
    prompt = prompt_of(body)
    if "<<DOCUMENT_START>>" in prompt:
        return json.dumps(next(graph for opening, graph in GRAPHS.items() if opening in prompt))
    if "extract all entities relevant to perform information retrieval" in prompt:
        return json.dumps({"named": ["Alice", "Acme"], "generic": ["founder"]})
    if "# USER QUERY" in prompt:
        return json.dumps({"answer": ANSWER})
    if "summarize it by removing redundant" in prompt:
        return json.dumps({"description": "A summary"})
    if "maintaining a list of facts" in prompt:
        return json.dumps({"grouped_facts": []})
    raise AssertionError(f"a prompt fast-graphrag's worker was not expected to send: {prompt[:200]!r}")


@pytest.fixture(scope="module")
def server():
    with ScriptedServer() as scripted:
        scripted.default_reply = fast_graphrag_reply
        yield scripted


@pytest.fixture(scope="module")
def worker(tmp_path_factory, upstream_systems):
    try:
        python_for("fast_graphrag")
    except SystemNotInstalled as err:
        pytest.skip(f"fast-graphrag's environment cannot be installed here: {err}")
    folder = tmp_path_factory.mktemp("fast_graphrag")
    with Worker("fast_graphrag", folder / "work", folder / "worker.log", timeout_s=300) as running:
        yield running


def endpoint(server: ScriptedServer, worker: Worker) -> dict:
    return {
        "base_url": server.base_url,
        "model": "scripted",
        "embedding_model": "scripted-embeddings",
        "workdir": str(worker.workdir),
    }


@pytest.fixture(scope="module")
def indexed(server, worker):
    return worker.request(
        "index",
        **endpoint(server, worker),
        documents=DOCUMENTS,
        graph=None,
        output=str(worker.workdir.parent / "graph.graphml"),
        options={"entity_types": ["person", "organization", "place"]},
    )


def test_hello_names_the_installed_version(worker):
    hello = worker.request("hello")
    assert (hello["system"], hello["version"]) == ("fast_graphrag", "0.0.5")


def test_index_stores_the_extracted_graph_and_counts_its_calls(indexed, server, worker):
    assert indexed["counts"]["documents"] == 2
    assert indexed["counts"]["entities"] >= 5  # Alice, Acme, Paris, Bob, Berlin (Acme merged)
    assert indexed["counts"]["relations"] >= 5
    assert indexed["counts"]["chunks"] == 2
    assert "ALICE" in (worker.workdir.parent / "graph.graphml").read_text()  # the `output` export
    usage = indexed["usage"]
    extraction_calls = [
        r for r in server.chat_requests() if "<<DOCUMENT_START>>" in r["body"]["messages"][-1]["content"]
    ]
    assert len(extraction_calls) == 2
    # fast-graphrag's JSON mode: a json_object response format, no tools
    assert all(r["body"]["response_format"] == {"type": "json_object"} for r in extraction_calls)
    assert not any("tools" in r["body"] for r in extraction_calls)
    assert usage["calls"] == len(server.requests) and usage["failed_calls"] == 0
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0


def test_query_returns_the_answer_its_context_and_usage(indexed, server, worker):
    before = len(server.requests)
    result = worker.request(
        "query",
        **endpoint(server, worker),
        question_id="q1",
        question="Who founded Acme?",
        mode="default",
        options={},
    )
    assert result["answer"] == ANSWER
    kinds = {item["kind"] for item in result["context"]}
    assert kinds == {"entity", "relation", "chunk"}
    names = {item["name"] for item in result["context"] if item["kind"] == "entity"}
    assert {"ALICE", "ACME"} <= names
    chunks = [item for item in result["context"] if item["kind"] == "chunk"]
    assert all(item["id"] and item["text"] in {d["text"] for d in DOCUMENTS} for item in chunks)
    relation = next(item for item in result["context"] if item["kind"] == "relation")
    assert relation["source"] and relation["target"]
    assert result["usage"]["calls"] == len(server.requests) - before == 3  # entities, embeddings, answer
    assert result["usage"]["prompt_tokens"] > 0 and result["usage"]["failed_calls"] == 0


def test_query_options_reach_fast_graphrag(indexed, server, worker):
    before = len(server.chat_requests())
    result = worker.request(
        "query",
        **endpoint(server, worker),
        question_id="q1",
        question="Who founded Acme?",
        mode="default",
        options={"only_context": True},
    )
    assert result["answer"] == "" and result["context"]
    assert len(server.chat_requests()) - before == 1  # the query's entities, no answer call


def test_structured_output_json_schema_mode_sends_the_schema(indexed, server, worker):
    before = len(server.chat_requests())
    result = worker.request(
        "query",
        **endpoint(server, worker),
        question_id="q1",
        question="Who founded Acme?",
        mode="default",
        options={"structured_output": "json_schema_mode"},
    )
    assert result["answer"] == ANSWER
    formats = [r["body"]["response_format"] for r in server.chat_requests()[before:]]
    assert [f["type"] for f in formats] == ["json_schema", "json_schema"]
    assert formats[0]["json_schema"]["schema"]["properties"].keys() == {"named", "generic"}


def test_an_unknown_option_is_refused_by_name(indexed, server, worker):
    with pytest.raises(UpstreamError, match="unknown options top_k; known: chunks_max_tokens"):
        worker.request(
            "query",
            **endpoint(server, worker),
            question_id="q1",
            question="Who founded Acme?",
            mode="default",
            options={"top_k": 3},
        )


@pytest.mark.fault
def test_a_failing_endpoint_fails_the_query_and_the_next_request_works(indexed, server, worker):
    # fast-graphrag's own policy tries a structured call 3 times; every attempt gets a 500
    server.script.extend([("status", 500)] * 3)
    with pytest.raises(UpstreamError) as raised:
        worker.request(
            "query",
            **endpoint(server, worker),
            question_id="q1",
            question="Who founded Acme?",
            mode="default",
            options={},
        )
    assert raised.value.op == "query" and "fast_graphrag query" in str(raised.value)
    result = worker.request(
        "query",
        **endpoint(server, worker),
        question_id="q1",
        question="Who founded Acme?",
        mode="default",
        options={},
    )
    assert result["answer"] == ANSWER


def _failing_extractions(server, monkeypatch):
    server.script.extend([("status", 500)] * 3 * len(DOCUMENTS))


def _unparsed_extractions(server, monkeypatch):
    # a reply that never parses makes fast-graphrag skip the document, with no call failed
    monkeypatch.setattr(server, "default_reply", lambda body: "Here are the entities: Alice, Acme.")


@pytest.mark.fault
@pytest.mark.parametrize(
    ("endpoint_does", "cause"),
    [
        (_failing_extractions, "6 of 6 model calls failed"),
        (_unparsed_extractions, "named no entity or did not parse"),
    ],
)
def test_an_index_with_no_entity_from_real_text_is_an_error_not_an_empty_graph(
    server, worker, tmp_path, monkeypatch, endpoint_does, cause
):
    """fast-graphrag over an empty graph would answer from nothing: another method under its name."""
    endpoint_does(server, monkeypatch)
    with pytest.raises(UpstreamError) as raised:
        worker.request(
            "index",
            **{**endpoint(server, worker), "workdir": str(tmp_path / "empty")},
            documents=DOCUMENTS,
            graph=None,
            output=None,
            options={"embedding_dim": 3},
        )
    assert raised.value.op == "index" and "stored no entities from 2 documents" in raised.value.message
    assert cause in raised.value.message


def test_a_prebuilt_graph_is_refused_by_name(server, worker):
    with pytest.raises(UpstreamError, match="fast-graphrag 0.0.5 builds its own graph"):
        worker.request(
            "index",
            **endpoint(server, worker),
            documents=None,
            graph={"chunks": [], "entities": [], "relations": []},
            output=None,
            options={},
        )


# A corpus whose build makes fast-graphrag merge: ACME in every document (and twice in each, so each
# document's own merge summarizes it too), its descriptions too long to join unsummarized, and more
# ACME-PARIS facts than fast-graphrag keeps unmerged: the summary and fact-merge prompts list what they
# merge in the order fast-graphrag met it. Every other document's extraction is first answered with
# text that is not JSON: instructor's retry prompt then quotes that whole reply (id, created, usage).
# As many documents as the dress rehearsal's: they are extracted at once, one connection each.
MERGING_DOCUMENTS = [
    {"id": f"m{i}", "title": f"Report {i}", "text": f"Report {i}: Person {i} visits Acme in Paris."}
    for i in range(48)
]
LONG = " and it keeps a long record of that visit, told at length so descriptions must be summarized" * 3


def merging_reply(body: dict) -> str:
    """fast-graphrag's replies for MERGING_DOCUMENTS, each held a random moment (the server's threads
    then answer in an order of their own, as a real endpoint's do).
    """
    time.sleep(random.uniform(0.0, 0.05))
    prompt = prompt_of(body)
    if "<<DOCUMENT_START>>" in prompt:
        i = next(i for i in range(len(MERGING_DOCUMENTS)) if f"Report {i}:" in prompt)
        if i % 2 and len(body["messages"]) == 2:  # the first attempt (system and user turns)
            return f"Report {i} names Person {i}, Acme and Paris."
        return json.dumps(
            {
                "entities": [
                    {"name": f"Person {i}", "type": "person", "desc": f"Visitor {i}"},
                    {"name": "Acme", "type": "organization", "desc": f"Visited by Person {i}{LONG}"},
                    {"name": "Acme", "type": "organization", "desc": f"Seen in report {i}{LONG}"},
                    {"name": "Paris", "type": "place", "desc": "City of Acme"},
                ],
                "relationships": [
                    {"source": f"Person {i}", "target": "Acme", "desc": f"Person {i} visits Acme"},
                    {"source": "Acme", "target": "Paris", "desc": f"Acme is in Paris (report {i})"},
                ],
                "other_relationships": [],
            }
        )
    if "summarize it by removing redundant" in prompt:
        merged = re.search(r"report (\d+)", prompt)
        return json.dumps({"description": f"A summary of report {merged.group(1) if merged else '?'}{LONG}"})
    if "maintaining a list of facts" in prompt:
        return json.dumps({"grouped_facts": [{"ids": [0, 1], "description": "Acme is in Paris"}]})
    raise AssertionError(f"a prompt the merging build was not expected to send: {prompt[:200]!r}")


def test_a_second_build_against_the_same_cache_makes_no_live_call(tmp_path, upstream_systems):
    """Two builds of one corpus, each in a worker process of its own, through one proxy and cache: the
    second sends fast-graphrag's prompts exactly as the first did, so every call is a cache hit.
    """
    try:
        python_for("fast_graphrag")
    except SystemNotInstalled as err:
        pytest.skip(f"fast-graphrag's environment cannot be installed here: {err}")
    with ScriptedServer() as scripted:
        scripted.default_reply = merging_reply
        llm = make_llm(scripted.base_url, tmp_path, concurrency=8)
        embedder = Embedder(
            EmbeddingSettings(backend="openai_compatible", base_url=scripted.base_url, model="emb"),
            llm.cache,
            llm.ledger,
            llm.settings,
        )
        live: list[list[dict]] = []
        with ModelProxy(llm, embedder) as proxy:
            for build in ("first", "second"):
                before = len(scripted.requests)
                with Worker("fast_graphrag", tmp_path / build, tmp_path / f"{build}.log", 300) as worker:
                    result = worker.request(
                        "index",
                        base_url=proxy.base_url("fast_graphrag", "upstream_index"),
                        model="scripted",
                        embedding_model="emb",
                        workdir=str(worker.workdir),
                        documents=MERGING_DOCUMENTS,
                        graph=None,
                        output=None,
                        options={"entity_types": ["person", "organization", "place"], "embedding_dim": 3},
                    )
                live.append(scripted.requests[before:])
                assert result["usage"]["failed_calls"] == 0  # every call reached the proxy
    assert result["counts"]["documents"] == len(MERGING_DOCUMENTS)
    # the first build merged: a summary in each document and one of ACME and of PARIS across them, one
    # merge of ACME-PARIS facts
    first = [prompt_of(r["body"]) for r in live[0] if r["path"].endswith("/chat/completions")]
    assert sum("summarize it by removing redundant" in p for p in first) == len(MERGING_DOCUMENTS) + 2
    assert sum("Correct your JSON ONLY RESPONSE" in p for p in first) == len(MERGING_DOCUMENTS) // 2
    assert sum("maintaining a list of facts" in p for p in first) == 1
    assert not live[1], "the second build sent requests the first did not: " + "; ".join(
        f"{r['path']} {json.dumps(r['body'].get('messages', [r['body']])[-1])[:300]}" for r in live[1]
    )
