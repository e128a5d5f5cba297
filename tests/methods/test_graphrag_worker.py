"""The Microsoft GraphRAG 3.3.0 worker in its own environment, against the scripted endpoint: hello,
an index over the Christmas Carol output folder, each search mode, and a failing endpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import SHARED_DATASETS
from scripted_server import InFlight, ScriptedServer

from ragtrial.methods.upstream.boundary import UpstreamError, Worker
from ragtrial.methods.upstream.environments import SystemNotInstalled, python_for

# Every test here shares a module worker of the real system, whose teardown may start it once more
# (shutdown): the whole module is in the slow tier.
# one pytest worker runs the module: one worker and one index for every test, built once
pytestmark = [pytest.mark.usefixtures("upstream_systems"), pytest.mark.xdist_group("graphrag_worker")]

CAROL_OUTPUT = SHARED_DATASETS / "graphrag_examples" / "a_christmas_carol_index" / "output"
MODES = ("local", "global", "drift", "basic")
# The scripted embedder's vectors have 3 dimensions; DRIFT kept to one small round.
OPTIONS = {
    "vector_size": 3,
    "max_context_tokens": 3000,
    "graphrag": {"drift_search": {"n_depth": 1, "primer_folds": 1, "drift_k_followups": 2}},
}
# A context item's id -> the parquet table and column GraphRAG takes it from.
ID_COLUMNS = {
    "entity": ("entities", "human_readable_id"),
    "relation": ("relationships", "human_readable_id"),
    "chunk": ("text_units", "human_readable_id"),
    "community_report": ("community_reports", "community"),
    "claim": ("covariates", "human_readable_id"),
}
SAMPLES = {"string": "Scrooge repents.", "integer": 80, "number": 0.8, "boolean": True}
# GraphRAG's extraction output format (its extract_graph prompt): records of tuples.
EXTRACTION = (
    '("entity"<|>SCROOGE<|>PERSON<|>Scrooge is a miser who keeps a counting-house)##'
    '("entity"<|>MARLEY<|>PERSON<|>Marley was Scrooge\'s partner, dead seven years)##'
    '("relationship"<|>SCROOGE<|>MARLEY<|>Marley was Scrooge\'s business partner<|>8)<|COMPLETE|>'
)


def sample(schema: dict, definitions: dict) -> object:
    """A value of JSON schema `schema` (pydantic's: $ref into $defs, objects, arrays, scalars)."""
    if "$ref" in schema:
        return sample(definitions[schema["$ref"].rsplit("/", 1)[-1]], definitions)
    if schema.get("type") == "object":
        return {name: sample(prop, definitions) for name, prop in schema["properties"].items()}
    if schema.get("type") == "array":
        return [sample(schema["items"], definitions)]
    return SAMPLES[schema["type"]]


def graphrag_reply(body: dict) -> str:
    """A reply every indexing and search step parses: the structured output a JSON schema asks for,
    graph tuples to the extraction prompt, else JSON with the global map's points and a DRIFT
    action's response, score and follow-ups.
    """
    response_format = body.get("response_format") or {}
    schema = (response_format.get("json_schema") or {}).get("schema") or response_format.get("schema")
    if schema:
        return json.dumps(sample(schema, schema.get("$defs", {})))
    if any("relationship_strength" in str(message.get("content")) for message in body["messages"]):
        return EXTRACTION
    return json.dumps(
        {
            "points": [{"description": "Scrooge repents [Data: Reports (1)]", "score": 80}],
            "response": "Scrooge repents.",
            "score": 80,
            "follow_up_queries": ["Who is Marley?"],
        }
    )


@pytest.fixture(scope="module")
def endpoint():
    with ScriptedServer() as server:
        server.default_reply = graphrag_reply
        yield server


@pytest.fixture(scope="module")
def worker(tmp_path_factory, upstream_systems):
    try:
        python_for("graphrag")
    except SystemNotInstalled as err:
        pytest.skip(f"GraphRAG's environment cannot be installed: {err}")
    folder = tmp_path_factory.mktemp("graphrag")
    with Worker("graphrag", folder / "work", folder / "worker.log", timeout_s=600) as running:
        yield running


def request_base(endpoint: ScriptedServer, worker: Worker) -> dict:
    return {
        "base_url": endpoint.base_url,
        "model": "scripted",
        "embedding_model": "emb",
        "workdir": str(worker.workdir),
    }


@pytest.fixture(scope="module")
def indexed(endpoint, worker):
    before = sorted((p.name, p.stat().st_mtime_ns) for p in CAROL_OUTPUT.iterdir())
    result = worker.request(
        "index",
        output=str(CAROL_OUTPUT),
        documents=None,
        graph=None,
        options=OPTIONS,
        **request_base(endpoint, worker),
    )
    assert sorted((p.name, p.stat().st_mtime_ns) for p in CAROL_OUTPUT.iterdir()) == before
    return result


def ask(endpoint: ScriptedServer, worker: Worker, mode: str, **options) -> dict:
    return worker.request(
        "query",
        question_id="q1",
        question="Who is Scrooge?",
        mode=mode,
        options={**OPTIONS, **options},
        **request_base(endpoint, worker),
    )


def test_hello_names_graphrag_3_3_0(worker):
    assert worker.request("hello")["version"] == "3.3.0"


def test_index_embeds_every_table_graphrag_searches(indexed):
    tables = {name: len(pd.read_parquet(CAROL_OUTPUT / f"{name}.parquet")) for name, _ in ID_COLUMNS.values()}
    counts = indexed["counts"]
    assert counts["embeddings.entity_description"] == counts["entities"] == tables["entities"]
    assert counts["embeddings.text_unit_text"] == counts["text_units"] == tables["text_units"]
    assert counts["embeddings.community_full_content"] == counts["community_reports"]
    assert indexed["usage"]["calls"] > 0 and indexed["usage"]["prompt_tokens"] > 0


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_answers_with_graphrags_context_and_usage(endpoint, worker, indexed, mode):
    result = ask(endpoint, worker, mode)
    assert result["answer"].strip()
    assert result["context"]
    for item in result["context"]:
        table, column = ID_COLUMNS[item["kind"]]
        known = set(pd.read_parquet(CAROL_OUTPUT / f"{table}.parquet")[column].astype(str))
        assert item["id"] in known, (mode, item["kind"], item["id"])
        assert item["text"].strip()
    usage = result["usage"]
    assert usage["calls"] > 0 and usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0


@pytest.mark.parametrize("concurrency", [1, 3])
def test_global_search_makes_as_many_calls_at_once_as_the_options_say(endpoint, worker, indexed, concurrency):
    held = InFlight(graphrag_reply, hold_s=0.05, kind_of=lambda body: "chat")
    endpoint.default_reply = held
    try:
        options = {"concurrency": concurrency} if concurrency > 1 else {}  # 1 is the default
        ask(endpoint, worker, "global", **options)
    finally:
        endpoint.default_reply = graphrag_reply
    assert held.most["chat"] == concurrency


@pytest.mark.fault
@pytest.mark.parametrize("status", [500, 400])
def test_a_failing_chat_call_is_an_error_naming_the_op_not_an_empty_answer(endpoint, worker, indexed, status):
    # local search embeds the question (the vector), then its one chat call fails: GraphRAG logs that
    # and returns an empty answer, which the worker must report as the failure it is
    endpoint.script.extend([("vectors", [[10.0, 1.0, 1.0]]), ("status", status)])
    with pytest.raises(UpstreamError) as raised:
        ask(endpoint, worker, "local")
    assert raised.value.op == "query" and "local search failed" in raised.value.message
    assert f"scripted {status}" in raised.value.message or str(status) in raised.value.message
    assert ask(endpoint, worker, "local")["answer"].strip()


@pytest.mark.fault
def test_a_failing_embedding_call_is_an_error_naming_the_op(endpoint, worker, indexed):
    # litellm 1.100's OpenAI embedding reads max_retries=0 as "the default" (`or 2`): three 500s
    endpoint.script.extend([("status", 500)] * 3)
    with pytest.raises(UpstreamError) as raised:
        ask(endpoint, worker, "basic")
    assert raised.value.op == "query"
    assert ask(endpoint, worker, "basic")["answer"].strip()


def test_documents_are_indexed_by_graphrags_standard_pipeline(endpoint, worker, tmp_path):
    documents = [
        {"id": "stave-1", "title": "Stave One", "text": "Marley was dead. Scrooge was his partner. " * 20},
        {"id": "stave-2", "title": "Stave Two", "text": "Scrooge kept a counting-house in the city. " * 20},
    ]
    base = {**request_base(endpoint, worker), "workdir": str(tmp_path / "docs")}
    options = {**OPTIONS, "chunk_size": 200, "chunk_overlap": 20}
    options["graphrag"] = {**OPTIONS["graphrag"], "extract_graph": {"max_gleanings": 0}}
    chats = len(endpoint.chat_requests())
    built = worker.request("index", output=None, documents=documents, graph=None, options=options, **base)
    counts = built["counts"]
    assert counts["documents"] == 2 and counts["text_units"] >= 2
    assert counts["entities"] == 2 and counts["relationships"] == 1 and counts["community_reports"] >= 1
    assert counts["embeddings.entity_description"] == 2
    # every chat call GraphRAG made (extractions, summaries, reports) is in its usage, with the embeddings
    assert built["usage"]["calls"] > len(endpoint.chat_requests()) - chats > 0
    answered = worker.request(
        "query", question_id="q1", question="Who was Marley?", mode="local", options=options, **base
    )
    entities = set(
        pd.read_parquet(tmp_path / "docs/output/entities.parquet")["human_readable_id"].astype(str)
    )
    named = {item["name"] for item in answered["context"] if item["kind"] == "entity"}
    assert named == {"SCROOGE", "MARLEY"}
    assert {item["id"] for item in answered["context"] if item["kind"] == "entity"} <= entities


def test_a_workdir_never_indexed_names_the_missing_table(endpoint, worker, tmp_path):
    with pytest.raises(UpstreamError) as raised:
        worker.request(
            "query",
            question_id="q1",
            question="Who is Scrooge?",
            mode="local",
            options=OPTIONS,
            **{**request_base(endpoint, worker), "workdir": str(tmp_path / "empty")},
        )
    assert "text_units.parquet is missing: run index on this workdir first" in raised.value.message


def test_an_unknown_mode_names_the_known_ones(endpoint, worker, indexed):
    with pytest.raises(UpstreamError, match="unknown mode 'hybrid'; known: local, global, drift, basic"):
        ask(endpoint, worker, "hybrid")


def test_output_folder_must_be_graphrags(endpoint, worker, tmp_path):
    with pytest.raises(UpstreamError, match=r"lacks .*entities"):
        worker.request(
            "index",
            output=str(tmp_path),
            documents=None,
            graph=None,
            options=OPTIONS,
            **request_base(endpoint, worker),
        )


def test_worker_script_imports_no_kit_module():
    source = (
        Path(__file__).parents[2] / "lib/ragtrial/methods/upstream/workers/graphrag_worker.py"
    ).read_text()
    assert "ragtrial" not in source.replace("ragtrial-proxy", "")
