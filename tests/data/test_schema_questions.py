"""The schema-driven test-set generator (seed 004, pre-launch graph) and its coverage table."""

from __future__ import annotations

import pandas as pd
import pytest

from ragtrial.config.data import DataSettings
from ragtrial.data.experiment_dataset import load_experiment_dataset
from ragtrial.data.schema_questions import QUESTION_TYPES, schema_coverage, schema_questions
from ragtrial.data.synthetic import LAST_YEAR, generate_corpus, world_tables


@pytest.fixture(scope="module")
def small():
    dataset, world = generate_corpus("small")
    entities, relations = world_tables(world, dataset)
    return dataset, entities, relations, schema_questions(entities, relations)


def test_every_relation_type_gets_two_questions_and_every_timed_entity_type_a_temporal_one(small):
    _, entities, relations, questions = small
    coverage = schema_coverage(questions, relations, entities)
    assert coverage["met"].all(), coverage
    relation_rows = coverage[coverage["kind"] == "relation"]
    assert set(relation_rows["name"]) == set(relations["relation"])
    assert (coverage[coverage["kind"] == "entity type"]["name"].tolist()) == [
        "event",
        "organization",
        "person",
        "place",
    ]
    assert {q.question_type for q in questions} == set(QUESTION_TYPES)


def test_schema_questions_carry_gold_that_matches_the_gold_graph(small):
    dataset, entities, relations, questions = small
    names = dict(zip(entities["entity_id"], entities["name"], strict=True))
    stated = {
        (names[r.source_id], r.relation, names[r.target_id]): (r.valid_from, r.valid_to, r.doc_ids)
        for r in relations.itertuples()
    }
    docs = {d.doc_id for d in dataset.documents}
    assert len({q.question_id for q in questions}) == len(questions)
    for q in questions:
        assert q.answers and q.key_facts and q.gold_entities and set(q.gold_doc_ids) <= docs, q
        for edge in q.gold_edges:
            valid_from, valid_to, doc_ids = stated[(edge.source, edge.relation, edge.target)]
            assert (edge.valid_from, edge.valid_to) == (
                None if pd.isna(valid_from) else valid_from,
                None if pd.isna(valid_to) else valid_to,
            )
            assert set(doc_ids) <= set(q.gold_doc_ids)
        if q.question_type == "multi_hop":  # two chained edges: the second starts where the first ends
            first, second = q.gold_edges
            assert {first.source, first.target} & {second.source, second.target}
        if q.question_type == "temporal":
            (edge,) = q.gold_edges
            assert edge.valid_from <= q.metadata["year"] <= (edge.valid_to or LAST_YEAR)
            assert str(q.metadata["year"]) in q.question
        if q.question_type == "contradictory":
            assert len(set(q.answers)) == len(q.gold_edges) == len(q.key_facts) >= 2
            assert all(f.startswith("According to ") for f in q.key_facts)
            docs_by_id = {d.doc_id: d for d in dataset.documents}
            for claim in q.metadata["claims"]:  # the generated corpus's claim shape
                assert docs_by_id[claim["doc_id"]].source == claim["source"]


def test_generic_phrasing_for_a_relation_type_without_a_template():
    entities = pd.DataFrame(
        [("a", "Alpha", "team", []), ("b", "Beta", "team", []), ("c", "Gamma", "vendor", [])],
        columns=["entity_id", "name", "type", "aliases"],
    )
    relations = pd.DataFrame(
        [
            ("r1", "a", "c", "uses_vendor", 2010, 2015, ["d1"]),
            ("r2", "b", "c", "uses_vendor", None, None, ["d2"]),
        ],
        columns=["relation_id", "source_id", "target_id", "relation", "valid_from", "valid_to", "doc_ids"],
    ).astype({"valid_from": "Int64", "valid_to": "Int64"})
    questions = schema_questions(entities, relations, n_per_relation=1)
    by_type = {q.question_type: q for q in questions}
    single = by_type["single_hop"]
    anchor = single.gold_edges[0].source
    assert single.question == f"Which entity is {anchor} linked to by 'uses vendor'?"
    assert single.answers == ["Gamma"]
    temporal = by_type["temporal"]  # only Alpha's edge is dated
    year = temporal.metadata["year"]
    assert year in range(2011, 2015)
    assert temporal.question == f"As of {year}, which entity is Alpha linked to by 'uses vendor'?"
    assert temporal.key_facts == ["Alpha uses vendor Gamma from 2010 to 2015."]
    coverage = schema_coverage(questions, relations, entities).set_index("name")
    assert coverage.loc["uses_vendor", "questions"] == 2 and coverage.loc["uses_vendor", "met"]
    assert coverage.loc["team", "questions"] == coverage.loc["vendor", "questions"] == 1
    short = schema_coverage([single], relations, entities).set_index("name")  # below both rules
    assert short["questions"].tolist() == [1, 0, 0] and not short["met"].any()


def test_question_plan_schema_replaces_the_template_questions_and_keeps_the_documents():
    templates = load_experiment_dataset(DataSettings(size="tiny"))
    schema = load_experiment_dataset(DataSettings(size="tiny", question_plan="schema"))
    assert [d.model_dump() for d in schema.documents] == [d.model_dump() for d in templates.documents]
    assert {q.metadata["plan"] for q in schema.questions} == {"schema"}
    assert all(q.question_id.startswith("schema-") for q in schema.questions)


def test_question_plan_schema_needs_the_generated_corpus():
    with pytest.raises(ValueError, match="only the generated corpus has a gold graph"):
        DataSettings(dataset="musique", path="musique_sample_hipporag", question_plan="schema")
