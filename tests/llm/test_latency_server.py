"""The benchmark's latency-simulating server: replies valid for the kit's own reply schemas, and
nothing but the request decides a reply (so a benchmark's results are the same at any concurrency).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import make_llm
from latency_server import Draw, LatencyServer, schema_instance

from ragtrial.evaluation.claims import claims_reply_schema
from ragtrial.evaluation.judge.protocols import classic_schema, score_schema
from ragtrial.index.create_community_reports import report_schema
from ragtrial.index.extract_llm_graph import claims_schema, graph_schema
from ragtrial.llm.backend_check import CapitalAnswer
from ragtrial.methods.map_reduce import map_schema
from ragtrial.methods.selection import RouteLabel
from ragtrial.questions.generated_records import list_schema, one_question_schema
from ragtrial.questions.quality import RelevanceRating
from ragtrial.retrieval.entity_graph import QuestionEntities
from ragtrial.retrieval.lightrag import QuestionKeywords

CHUNK = (
    "Text:\nMarta Velasquez founded Orbital Dynamics in Lisbon. Orbital Dynamics later partnered with "
    "the Kestrel Institute on the Helios launch, which Velasquez announced at the Lisbon Forum."
)
KIT_SCHEMAS = [
    graph_schema(("person", "organization", "location"), 3, 48),
    graph_schema(("person",), None, None),
    claims_schema(3, 48),
    report_schema(2, 120),
    score_schema(("comprehensiveness", "relevance", "empowerment", "directness")),
    classic_schema(False),
    classic_schema(True),
    claims_reply_schema(5),
    map_schema(2, 160),
    list_schema("questions", 3, 140),
    one_question_schema(140),
    RelevanceRating,
    RouteLabel,
    QuestionEntities,
    QuestionKeywords,
    CapitalAnswer,
]


def chat_body(content: str, schema=None, seed: int = 0) -> dict:
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "seed": seed, "max_tokens": 64}
    if schema is not None:
        body["response_format"] = {"type": "json_object", "schema": schema.model_json_schema()}
    return body


@pytest.mark.parametrize("schema", KIT_SCHEMAS, ids=lambda s: s.__name__)
@pytest.mark.parametrize("seed", range(5))
def test_instances_validate_against_the_kits_reply_schemas(schema, seed):
    draw = Draw(chat_body(CHUNK, schema, seed))
    schema.model_validate_json(json.dumps(schema_instance(schema.model_json_schema(), draw)))


def test_an_extraction_names_what_its_chunk_mentions():
    schema = graph_schema(("person", "organization", "location"), 3, 48)
    reply = schema_instance(schema.model_json_schema(), Draw(chat_body(CHUNK, schema)))
    names = {e["name"] for e in reply["entities"]} | {r["source"] for r in reply["relations"]}
    assert reply["entities"] and names <= {
        "Marta Velasquez",
        "Orbital Dynamics",
        "Lisbon",
        "Kestrel Institute",
        "Helios",
        "Velasquez",
    }


def test_replies_depend_on_the_request_alone(tmp_path):
    """Through the kit's client, at 8 threads: each request's reply equals its reply served alone,
    and a reply differs when the request does (another seed: a judge's next trial).
    """
    prompts = [f"{CHUNK} Question {i}?" for i in range(16)]
    with LatencyServer(latency_s=0.0) as server:
        alone = make_llm(server.base_url, tmp_path / "alone")
        expected = [alone.complete(p, stage="bench").text for p in prompts]
        together = make_llm(server.base_url, tmp_path / "together", concurrency=8)
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda p: together.complete(p, stage="bench").text, prompts))
        reseeded = make_llm(server.base_url, tmp_path / "reseeded", seed=1).complete(
            prompts[0], stage="bench"
        )
        verdict = alone.structured(CHUNK, classic_schema(False), stage="bench")
    assert got == expected
    assert reseeded.text != expected[0]
    assert classic_schema(False).model_validate(verdict.model_dump()) == verdict
    assert server.requests == 2 * len(prompts) + 2
