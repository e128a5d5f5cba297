"""LLM graph extraction against the scripted server: replies are chosen by the chunk they answer."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import make_llm

from ragtrial.config.index import IndexSettings
from ragtrial.index.extract_llm_graph import UNKNOWN_TYPE, extract_llm_graph, graph_schema
from ragtrial.index.merge_extractions import entity_key, normalize_name


def graph(entities: list[tuple[str, str, str]], relations: list[tuple[str, str, str, int]] = ()) -> str:
    return json.dumps(
        {
            "entities": [{"name": n, "type": t, "description": d} for n, t, d in entities],
            "relations": [
                {"source": s, "target": t, "description": d, "strength": w} for s, t, d, w in relations
            ],
        }
    )


def chunks(*texts: str) -> pd.DataFrame:
    return pd.DataFrame({"chunk_id": [f"c{i}" for i in range(len(texts))], "text": list(texts)})


def answer_by_text(scripted, replies: dict[str, str], summary: str = "One merged description.") -> None:
    """The reply for a request is the one whose key occurs in the text its first user turn asks
    about (after the prompt's last "Text:" line, so the few-shot example never matches).
    """

    def reply(body: dict) -> str:
        asked = next(
            m["content"] for m in body["messages"] if m["role"] == "user"
        )  # a repair round repeats it
        if asked.startswith("Write one comprehensive description"):
            return summary
        for key, text in replies.items():
            if key in asked.rsplit("Text:\n", 1)[-1]:
                return text
        raise AssertionError(f"unscripted request: {asked[:80]}")

    scripted.default_reply = reply


def settings(**values) -> IndexSettings:
    return IndexSettings(**{"llm_max_chunks": None, **values})


def test_valid_replies_become_entities_and_weighted_relations(scripted, tmp_path) -> None:
    answer_by_text(
        scripted,
        {
            "Ada met Bob": graph(
                [("Ada Lind", "person", "an engineer"), ("Bob Ray", "person", "a pilot")],
                [("Ada Lind", "Bob Ray", "Ada met Bob", 7)],
            )
        },
    )
    result = extract_llm_graph(make_llm(scripted.base_url, tmp_path), chunks("Ada met Bob."), settings())
    ents = result.entities.set_index("name")
    assert list(ents.index) == ["Ada Lind", "Bob Ray"]
    assert ents.loc["Ada Lind", "entity_id"] == entity_key(normalize_name("Ada Lind"))
    assert ents.loc["Ada Lind", "chunk_ids"] == ["c0"] and set(ents["origin"]) == {"llm"}
    rel = result.relations.iloc[0]
    assert (rel["weight"], rel["description"], rel["chunk_ids"]) == (7.0, "Ada met Bob", ["c0"])
    assert result.failures.empty and result.stats["failed_chunks"] == 0
    request = scripted.chat_requests()[0]["body"]
    assert (
        request["max_tokens"] == 256
        and request["response_format"]["schema"]["properties"]["entities"]["maxItems"] == 3
    )


def test_malformed_reply_is_recorded_as_a_failure_not_an_empty_graph(scripted, tmp_path) -> None:
    answer_by_text(scripted, {"good": graph([("Ada Lind", "person", "x")]), "bad": '{"entities": [oops'})
    result = extract_llm_graph(
        make_llm(scripted.base_url, tmp_path), chunks("good text", "bad text"), settings()
    )
    assert list(result.failures[["chunk_id", "stage", "kind"]].itertuples(index=False, name=None)) == [
        ("c1", "extract_graph", "parse")
    ]
    assert "GraphExtraction" in result.failures["detail"].iloc[0]
    assert result.stats["failed_chunks"] == 1 and result.stats["attempted_chunks"] == 2
    assert result.entities["chunk_ids"].tolist() == [["c0"]]  # the bad chunk contributed nothing
    assert len(scripted.chat_requests()) == 3  # good, bad, and the one repair round of the bad reply


def test_duplicates_merge_across_chunks_and_differing_descriptions_are_summarized(scripted, tmp_path) -> None:
    answer_by_text(
        scripted,
        {
            "first": graph(
                [("Ada Lind", "person", "an engineer"), ("Kel Works", "organization", "a firm")],
                [("Ada Lind", "Kel Works", "works at", 4)],
            ),
            "second": graph(
                [("ada lind", "person", "born in Tarn"), ("Kel Works", "organization", "a firm")],
                [("Kel Works", "Ada Lind", "employs", 3)],
            ),
        },
        summary="Ada Lind is an engineer born in Tarn.",
    )
    result = extract_llm_graph(make_llm(scripted.base_url, tmp_path), chunks("first", "second"), settings())
    ents = result.entities.set_index("name")
    assert len(ents) == 2 and ents.loc["Ada Lind", "chunk_ids"] == ["c0", "c1"]
    assert ents.loc["Ada Lind", "description"] == "Ada Lind is an engineer born in Tarn."
    assert ents.loc["Kel Works", "description"] == "a firm"  # one distinct description: no summary call
    rel = result.relations.iloc[0]
    assert len(result.relations) == 1 and rel["weight"] == 7.0 and rel["chunk_ids"] == ["c0", "c1"]
    assert rel["description"] == "Ada Lind is an engineer born in Tarn."  # two descriptions: summarized too
    assert result.stats["description_summaries"] == {
        "candidates": 2,
        "summarized": 2,
        "failed": 0,
        "not_summarized": 0,
    }
    prompts = [r["body"]["messages"][-1]["content"] for r in scripted.chat_requests()]
    assert any("- an engineer\n- born in Tarn" in p for p in prompts)


@pytest.mark.parametrize(
    ("relation_weight", "weights"), [("strength", [7.0 + 3.0 + 9.0, 2.0]), ("occurrences", [3.0, 1.0])]
)
def test_edge_weight_is_summed_strength_or_number_of_occurrences(
    scripted, tmp_path, relation_weight, weights
) -> None:
    """Seed 002 3.1.3: "the number of duplicate occurrences of a relation is used as the edge weight";
    GraphRAG's code sums the model's strengths instead. Three chunks state Ada-Kel (once reversed),
    one states Ada-Bob.
    """
    ada, kel, bob = (
        ("Ada Lind", "person", "x"),
        ("Kel Works", "organization", "y"),
        ("Bob Ray", "person", "z"),
    )
    answer_by_text(
        scripted,
        {
            "first": graph(
                [ada, kel, bob],
                [("Ada Lind", "Kel Works", "works at", 7), ("Ada Lind", "Bob Ray", "knows", 2)],
            ),
            "second": graph([ada, kel], [("Kel Works", "Ada Lind", "employs", 3)]),
            "third": graph([ada, kel], [("Ada Lind", "Kel Works", "works at", 9)]),
        },
    )
    result = extract_llm_graph(
        make_llm(scripted.base_url, tmp_path),
        chunks("first", "second", "third"),
        settings(relation_weight=relation_weight, max_summaries=0),
    )
    names = dict(zip(result.entities["entity_id"], result.entities["name"], strict=True))
    got = {
        frozenset((names[s], names[t])): w
        for s, t, w in zip(
            result.relations["source_id"],
            result.relations["target_id"],
            result.relations["weight"],
            strict=True,
        )
    }
    assert got == {
        frozenset(("Ada Lind", "Kel Works")): weights[0],
        frozenset(("Ada Lind", "Bob Ray")): weights[1],
    }
    assert len(scripted.chat_requests()) == 3  # one extraction call per chunk, no summaries


def test_summaries_are_bounded(scripted, tmp_path) -> None:
    answer_by_text(
        scripted,
        {
            "first": graph([("Ada Lind", "person", "an engineer")]),
            "second": graph([("Ada Lind", "person", "born in Tarn")]),
        },
    )
    result = extract_llm_graph(
        make_llm(scripted.base_url, tmp_path), chunks("first", "second"), settings(max_summaries=0)
    )
    assert result.entities["description"].tolist() == ["an engineer\nborn in Tarn"]
    assert result.stats["description_summaries"]["not_summarized"] == 1
    assert len(scripted.chat_requests()) == 2


def test_dangling_relation_endpoints_become_unknown_type_entities(scripted, tmp_path) -> None:
    answer_by_text(
        scripted,
        {
            "one": graph([("Ada Lind", "person", "x")], [("Ada Lind", "Tarn", "born in", 6)]),
            "two": graph([("Tarn", "location", "a town")]),
        },
    )
    result = extract_llm_graph(
        make_llm(scripted.base_url, tmp_path), chunks("one", "two", "three one"), settings()
    )
    assert (
        result.stats["endpoint_instances_added"] == 2
    )  # chunks c0 and c2 both name Tarn only as an endpoint
    tarn = result.entities.set_index("name").loc["Tarn"]
    assert tarn["type"] == "location" and tarn["chunk_ids"] == [
        "c0",
        "c1",
        "c2",
    ]  # a known type wins the merge
    assert result.stats["entities_from_endpoints_only"] == 0

    answer_by_text(
        scripted, {"one": graph([("Ada Lind", "person", "x")], [("Ada Lind", "Tarn", "born in", 6)])}
    )
    alone = extract_llm_graph(make_llm(scripted.base_url, tmp_path / "b"), chunks("one"), settings())
    assert alone.entities.set_index("name").loc["Tarn", "type"] == UNKNOWN_TYPE
    assert alone.stats["entities_from_endpoints_only"] == 1 and len(alone.relations) == 1


def test_gleaning_asks_for_missed_elements_and_stops_on_an_empty_round(scripted, tmp_path) -> None:
    first = graph([("Ada Lind", "person", "x")])
    replies = iter(
        [first, graph([("Bob Ray", "person", "y")], [("Ada Lind", "Bob Ray", "met", 5)]), graph([])]
    )
    scripted.default_reply = lambda body: next(replies)
    result = extract_llm_graph(
        make_llm(scripted.base_url, tmp_path), chunks("Ada met Bob."), settings(max_gleanings=3)
    )
    assert sorted(result.entities["name"]) == ["Ada Lind", "Bob Ray"] and len(result.relations) == 1
    assert result.stats["gleaning_rounds"] == 2 and result.stats["gleaned_entities"] == 1
    glean = scripted.chat_requests()[1]["body"]["messages"]
    assert glean[-2] == {"role": "assistant", "content": json.dumps(json.loads(first), separators=(",", ":"))}
    assert glean[-1]["content"].startswith("MANY entities and relationships were missed")
    assert len(scripted.chat_requests()) == 3  # the empty third reply ended gleaning before round 3


def test_claims_link_to_entities(scripted, tmp_path) -> None:
    claims = json.dumps(
        {
            "claims": [
                {
                    "subject": "Kel Works",
                    "object": "Ada Lind",
                    "claim_type": "hiring",
                    "status": "TRUE",
                    "start_date": "2019-01-01",
                    "end_date": None,
                    "description": "Kel Works hired Ada Lind",
                },
                {
                    "subject": "Ada Lind",
                    "object": "NONE",
                    "claim_type": "AWARD",
                    "status": "SUSPECTED",
                    "start_date": None,
                    "end_date": None,
                    "description": "Ada may have won an award",
                },
            ]
        }
    )
    scripted.default_reply = lambda body: (
        claims
        if "Entities: Ada Lind\n" in body["messages"][-1]["content"]
        else graph([("Ada Lind", "person", "x")])
    )
    result = extract_llm_graph(
        make_llm(scripted.base_url, tmp_path), chunks("Kel hired Ada."), settings(claims=True)
    )
    rows = result.claims.set_index("claim_type")
    assert rows.loc["HIRING", "subject_id"] == entity_key("kel works")  # added as an unknown-type entity
    assert rows.loc["HIRING", "object_id"] == entity_key("ada lind")
    assert pd.isna(rows.loc["AWARD", "object_id"]) and rows.loc["AWARD", "status"] == "SUSPECTED"
    assert rows.loc["HIRING", "chunk_ids"] == ["c0"] and result.stats["endpoint_instances_added"] == 1


def test_only_a_seeded_sample_of_chunks_is_read_when_bounded(scripted, tmp_path) -> None:
    scripted.default_reply = lambda body: graph([("Ada Lind", "person", "x")])
    texts = [f"text {i}" for i in range(6)]
    result = extract_llm_graph(
        make_llm(scripted.base_url, tmp_path), chunks(*texts), settings(llm_max_chunks=2, max_summaries=0)
    )
    assert result.stats["attempted_chunks"] == 2 and len(result.stats["skipped_chunk_ids"]) == 4
    read = result.entities["chunk_ids"].iloc[0]
    assert read == sorted(read) and set(read).isdisjoint(result.stats["skipped_chunk_ids"])


def test_reply_schema_bounds_items_lengths_and_types() -> None:
    schema = graph_schema(("person",), 2, 10)
    with pytest.raises(ValueError):
        schema.model_validate_json(graph([("A", "person", "x")] * 3))
    with pytest.raises(ValueError):
        schema.model_validate_json(graph([("A", "person", "a description too long")]))
    with pytest.raises(ValueError):
        schema.model_validate_json(graph([("A", "place", "x")]))
    with pytest.raises(ValueError):
        schema.model_validate_json(graph([("A", "person", "x")], [("A", "B", "x", 11)]))
    assert (
        graph_schema(("person",), None, None).model_json_schema()["properties"]["entities"].get("maxItems")
        is None
    )


@pytest.mark.usefixtures("embedded_model")
def test_the_embedded_model_accepts_the_bounded_reply_schema(tmp_path) -> None:
    """llama.cpp turns the reply schema (enums, maxItems, maxLength) into a grammar; one short real
    extraction must end in a valid bounded graph or a recorded failure, never a server error.
    """
    from ragtrial.config.llm import LLMSettings
    from ragtrial.llm.cache import ResponseCache
    from ragtrial.llm.client import LLM
    from ragtrial.llm.ledger import Ledger
    from ragtrial.llm.server import EmbeddedServer

    llm_settings = LLMSettings()
    server = EmbeddedServer(llm_settings, tmp_path / "server.log")
    base_url = server.start()
    try:
        llm = LLM(llm_settings, ResponseCache(tmp_path / "c.sqlite"), Ledger("t"), lambda: base_url)
        result = extract_llm_graph(
            llm,
            chunks("Ada Lind was born in Tarn."),
            settings(max_items=1, text_max_chars=16, extraction_max_tokens=96, max_summaries=0),
        )
    finally:
        server.stop()
    assert len(result.entities) <= 3 and len(result.relations) <= 1  # one entity, plus dangling endpoints
    assert result.failures["kind"].isin(["parse"]).all()
    assert llm.ledger.frame()["failure"].isin(["", "parse"]).all()


def test_the_extraction_prompt_asks_for_the_entity_types_and_the_reply_schema_allows_only_them(
    scripted, tmp_path
):
    # seed 002's index.entity_types: GraphRAG's defaults reach the extraction request
    answer_by_text(scripted, {"Ada met Bob": graph([("Ada Lind", "person", "an engineer")])})
    types = ["organization", "person", "geo", "event"]
    extract_llm_graph(
        make_llm(scripted.base_url, tmp_path), chunks("Ada met Bob."), settings(entity_types=types)
    )
    request = scripted.chat_requests()[0]["body"]
    assert "organization, person, geo, event" in "\n".join(m["content"] for m in request["messages"])
    schema = request["response_format"]["schema"]
    entity = schema["properties"]["entities"]["items"]
    entity = schema["$defs"][entity["$ref"].rsplit("/", 1)[-1]] if "$ref" in entity else entity
    assert entity["properties"]["type"]["enum"] == types
