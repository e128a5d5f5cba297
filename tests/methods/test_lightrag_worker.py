"""The LightRAG worker (lightrag-hku in the kit's environment) behind the process boundary, against the
scripted OpenAI-compatible server: the kit's graph inserted as LightRAG's custom KG, every query mode
answering with its context mapped back to kit ids, usage counted, failures raised, repeats identical.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import pytest
from scripted_server import ScriptedServer

from ragtrial.methods.upstream.boundary import UpstreamError, Worker, worker_environment
from ragtrial.methods.upstream.environments import worker_script

# Every test here shares a module worker of the real system, whose teardown may start it once more
# (shutdown): the whole module is in the slow tier.
# one pytest worker runs the module: one worker and one index for every test, built once
pytestmark = [pytest.mark.usefixtures("upstream_systems"), pytest.mark.xdist_group("lightrag_worker")]

ANSWER = "Ada Lovelace was born in London."
KEYWORDS = json.dumps({"high_level_keywords": ["birthplace"], "low_level_keywords": ["Ada Lovelace"]})
# The kit's graph tables as rows; r3 is a self-loop, which LightRAG refuses.
GRAPH = {
    "chunks": [
        {"chunk_id": "c1", "doc_id": "d1", "text": "Ada Lovelace was born in London in 1815."},
        {"chunk_id": "c2", "doc_id": "d1", "text": "Charles Babbage designed the Analytical Engine."},
    ],
    "entities": [
        {
            "entity_id": "e1",
            "name": "Ada Lovelace",
            "type": "person",
            "description": "A mathematician.",
            "chunk_ids": ["c1"],
        },
        {"entity_id": "e2", "name": "London", "type": "place", "description": "A city.", "chunk_ids": ["c1"]},
        {
            "entity_id": "e3",
            "name": "Charles Babbage",
            "type": "person",
            "description": "An inventor.",
            "chunk_ids": ["c2", "c1"],
        },
    ],
    "relations": [
        {
            "relation_id": "r1",
            "source_id": "e1",
            "target_id": "e2",
            "description": "Ada Lovelace was born in London.",
            "weight": 1.0,
            "chunk_ids": ["c1"],
        },
        {
            "relation_id": "r2",
            "source_id": "e1",
            "target_id": "e3",
            "description": "Ada Lovelace worked with Charles Babbage.",
            "weight": 2.0,
            "chunk_ids": ["c2"],
        },
        {
            "relation_id": "r3",
            "source_id": "e2",
            "target_id": "e2",
            "description": "London is London.",
            "weight": 1.0,
            "chunk_ids": ["c1"],
        },
    ],
}
KIT_ENTITY = {"Ada Lovelace": "e1", "London": "e2", "Charles Babbage": "e3"}
KIT_RELATION = {frozenset({"e1", "e2"}): "r1", frozenset({"e1", "e3"}): "r2"}
KIT_CHUNK = {row["text"]: row["chunk_id"] for row in GRAPH["chunks"]}


def reply(body: dict) -> str:
    """Keywords for LightRAG's keyword extraction, the answer for everything else."""
    return KEYWORDS if "low_level_keywords" in body["messages"][-1]["content"] else ANSWER


@pytest.fixture(scope="module")
def server():
    with ScriptedServer() as scripted:
        scripted.default_reply = reply
        yield scripted


@pytest.fixture(autouse=True)
def fresh_script(server):
    """What a test scripted and did not use never reaches the next test."""
    yield
    server.script.clear()


@pytest.fixture(scope="module")
def worker(server, tmp_path_factory, upstream_systems):
    """One LightRAG worker with the kit's GRAPH indexed; the index's result in `worker.indexed`."""
    folder = tmp_path_factory.mktemp("lightrag")
    with Worker("lightrag", folder / "work", folder / "worker.log", timeout_s=120) as running:
        running.endpoint = {
            "base_url": server.base_url,
            "model": "scripted",
            "embedding_model": "emb",
            "workdir": str(folder / "work"),
        }
        # The scripted server's vectors have 3 dimensions (the kit's embedder: 384, the default).
        running.indexed = running.request(
            "index",
            graph=GRAPH,
            documents=None,
            output=None,
            options={"embedding_dim": 3},
            **running.endpoint,
        )
        yield running


def ask(worker: Worker, mode: str, question: str = "Where was Ada Lovelace born?", **options) -> dict:
    return worker.request(
        "query", question_id="q1", question=question, mode=mode, options=options, **worker.endpoint
    )


def requests_during(server, action) -> tuple[object, list[dict]]:
    before = len(server.requests)
    result = action()
    return result, server.requests[before:]


def test_hello_names_the_system_and_its_installed_version(worker):
    said = worker.request("hello")
    assert (said["system"], said["version"]) == ("lightrag", version("lightrag-hku"))


def test_the_kits_graph_is_inserted_and_the_counts_are_read_back_from_lightrags_storage(worker):
    # The self-loop is counted, not silently lost; inserting the KG needs embeddings only.
    assert worker.indexed["counts"] == {
        "entities": 3,
        "relations": 2,
        "chunks": 2,
        "self_loops_not_inserted": 1,
    }
    assert worker.indexed["usage"] == {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}


@pytest.mark.parametrize("mode", ["naive", "local", "global", "hybrid", "mix"])
def test_every_mode_answers_with_its_context_in_kit_ids_and_counts_its_calls(worker, server, mode):
    result, sent = requests_during(server, lambda: ask(worker, mode))
    assert result["answer"] == ANSWER
    kinds = {item["kind"] for item in result["context"]}
    assert kinds == ({"chunk"} if mode == "naive" else {"chunk", "entity", "relation"})
    for item in result["context"]:
        if item["kind"] == "chunk":
            assert item["chunk_ids"] == [KIT_CHUNK[item["text"]]] and item["id"].startswith("chunk-")
        elif item["kind"] == "entity":
            assert item["entity_ids"] == [KIT_ENTITY[item["name"]]] and item["id"] == item["name"]
            # LightRAG keeps one source chunk per inserted entity: the first of the kit's chunk_ids.
            first_chunk = next(row for row in GRAPH["entities"] if row["name"] == item["name"])["chunk_ids"][
                0
            ]
            assert item["chunk_ids"] == [first_chunk]
        else:
            ends = {KIT_ENTITY[item["source"]], KIT_ENTITY[item["target"]]}
            assert item["relation_ids"] == [KIT_RELATION[frozenset(ends)]]
            assert set(item["entity_ids"]) == ends and item["id"].startswith("rel-")
    chats = [r["body"] for r in sent if r["path"].endswith("/chat/completions")]
    # naive: the answer only; the graph modes extract keywords first.
    assert len(chats) == (1 if mode == "naive" else 2)
    assert result["usage"] == {
        "calls": len(chats),
        "prompt_tokens": sum(len(m["content"].split()) for body in chats for m in body["messages"]),
        "completion_tokens": sum(len(reply(body).split()) for body in chats),
    }


@pytest.mark.fault
@pytest.mark.parametrize(
    ("mode", "answered"), [("naive", 0), ("naive", 1), ("local", 0), ("local", 1), ("mix", 2)]
)
def test_a_failing_endpoint_is_an_upstream_error_naming_the_op_and_the_next_query_works(
    worker, server, mode, answered
):
    # The endpoint goes down after `answered` of the query's requests (local and mix: the keywords,
    # the embeddings, the answer; LightRAG embeds once more on its own when its batched embedding fails).
    server.script.extend([("default",)] * answered + [("status", 500)] * 5)
    with pytest.raises(UpstreamError) as raised:
        ask(worker, mode)
    assert raised.value.op == "query" and "500" in raised.value.message
    server.script.clear()  # the endpoint is back
    assert ask(worker, mode)["answer"] == ANSWER


@pytest.mark.fault
def test_a_failed_call_is_not_retried_by_the_worker(worker, server):
    # The kit's LLM layer behind base_url retries; a retry here would be a second, uncounted call.
    server.script.append(("status", 500))
    _, sent = requests_during(server, lambda: pytest.raises(UpstreamError, ask, worker, "naive"))
    assert len(sent) == 1


@pytest.mark.parametrize("mode", ["naive", "hybrid"])
def test_a_repeated_query_sends_the_same_requests_so_the_kits_cache_would_replay_it(worker, server, mode):
    _, first = requests_during(server, lambda: ask(worker, mode, top_k=5))
    _, second = requests_during(server, lambda: ask(worker, mode, top_k=5))
    assert [(r["path"], r["body"]) for r in first] == [(r["path"], r["body"]) for r in second]


def test_unknown_options_and_modes_are_errors_naming_them(worker):
    with pytest.raises(UpstreamError, match="unknown query options: topk"):
        ask(worker, "local", topk=3)
    with pytest.raises(UpstreamError, match="unknown LightRAG mode 'drift'"):
        ask(worker, "drift")


@pytest.fixture
def fresh_worker(server, tmp_path, upstream_systems):
    """A worker over an empty workdir, and the endpoint fields of its requests."""
    workdir = tmp_path / "work"
    endpoint = {
        "base_url": server.base_url,
        "model": "scripted",
        "embedding_model": "emb",
        "workdir": str(workdir),
    }
    with Worker("lightrag", workdir, tmp_path / "worker.log", timeout_s=120) as running:
        yield running, endpoint


def test_documents_are_indexed_by_lightrags_own_extraction_through_base_url(fresh_worker, server):
    worker, endpoint = fresh_worker
    documents = [{"id": "doc-1", "title": "Ada", "text": "Ada Lovelace was born in London in 1815."}]
    indexed, sent = requests_during(
        server,
        lambda: worker.request(
            "index", graph=None, documents=documents, output=None, options={"embedding_dim": 3}, **endpoint
        ),
    )
    chats = [r for r in sent if r["path"].endswith("/chat/completions")]
    # The scripted replies name no entities: LightRAG stores the chunk and nothing else.
    assert indexed["counts"] == {"entities": 0, "relations": 0, "chunks": 1}
    assert chats and indexed["usage"]["calls"] == len(chats)
    assert any(documents[0]["text"] in m["content"] for r in chats for m in r["body"]["messages"])


@pytest.mark.fault
def test_a_failed_index_names_the_op_and_its_workdir_is_not_indexed_again(fresh_worker, server):
    worker, endpoint = fresh_worker
    documents = [{"id": "doc-1", "title": "Ada", "text": "Ada Lovelace was born in London in 1815."}]
    index = {"output": None, "options": {"embedding_dim": 3}, **endpoint}
    server.script.extend([("status", 500)] * 5)
    with pytest.raises(UpstreamError) as raised:
        worker.request("index", graph=None, documents=documents, **index)
    assert raised.value.op == "index" and "doc-1" in raised.value.message and "500" in raised.value.message
    server.script.clear()
    # What the failed insert left would mix with the next graph.
    with pytest.raises(UpstreamError, match="holds a previous index .* index into an empty workdir"):
        worker.request("index", graph=GRAPH, documents=None, **index)


@pytest.mark.usefixtures("upstream_systems")  # imports LightRAG in a process of its own
def test_the_worker_refuses_the_pip_installs_lightrag_would_make_at_run_time(tmp_path):
    # In a process of its own: importing the worker patches pipmaster for the whole process.
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import lightrag_worker, pipmaster\n"
        "try:\n    pipmaster.install('voyageai')\nexcept RuntimeError as err:\n    print(err)\n"
    )
    said = subprocess.run(
        [sys.executable, "-c", probe, str(worker_script("lightrag").parent)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=worker_environment(),
    )
    assert "installs nothing at run time" in said.stdout and "voyageai" in said.stdout


def test_one_worker_serves_one_workdir(worker, tmp_path):
    with pytest.raises(UpstreamError, match="this worker serves .*; start another one for"):
        worker.request(
            "query",
            question_id="q1",
            question="Who?",
            mode="naive",
            options={},
            **{**worker.endpoint, "workdir": str(tmp_path)},
        )
