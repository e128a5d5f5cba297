"""The generated corpus: deterministic, unique names, and every gold fact stated in its gold documents."""

from __future__ import annotations

import math
import re
import warnings
from collections import Counter

import pytest

from ragtrial.data.synthetic import (
    EVENT_KINDS,
    INDUSTRIES,
    LAST_YEAR,
    ORG_SUFFIXES,
    OUTLET_FORMS,
    PRESETS,
    REGION_KINDS,
    World,
    generate_corpus,
    generate_world,
    render_corpus,
    world_tables,
)
from ragtrial.records import Dataset


@pytest.fixture(scope="module")
def corpora() -> dict[str, tuple[Dataset, World]]:
    out = {size: generate_corpus(size) for size in ("tiny", "small", "medium")}
    out.update({f"small-seed{s}": generate_corpus("small", seed=s) for s in (1, 2, 3)})
    return out


@pytest.fixture(scope="module")
def large() -> tuple[Dataset, World]:
    return generate_corpus("large")


def mentions(text: str, phrase: str) -> bool:
    """Whole-word match, so 'Tal' is not found inside 'Talvek'."""
    return re.search(rf"\b{re.escape(phrase)}\b", text) is not None


def relation_for(world: World, edge) -> list:
    names = {e.id: e.name for e in world.entities}
    return [
        r
        for r in world.relations
        if (names[r.source], r.type, names[r.target]) == (edge.source, edge.relation, edge.target)
    ]


def test_same_seed_gives_byte_identical_output():
    (a, wa), (b, wb) = generate_corpus("small", seed=5), generate_corpus("small", seed=5)
    assert a.model_dump_json() == b.model_dump_json()
    assert wa.model_dump_json() == wb.model_dump_json()


def test_different_seed_gives_a_different_world(corpora):
    names = [{e.name for e in corpora[key][1].entities} for key in ("small", "small-seed1")]
    assert names[0] != names[1]
    assert corpora["small"][0].documents[0].text != corpora["small-seed1"][0].documents[0].text


@pytest.mark.parametrize("key", ["small", "medium"])
def test_names_unique_and_share_no_invented_word(corpora, key):
    _, world = corpora[key]
    names = [e.name for e in world.entities] + world.outlets
    assert len(names) == len(set(names))
    # Invented words belong to exactly one name, so a name never occurs inside another one; only
    # the fixed vocabulary ("Works", "Valley", "Drone", "The", ...) is shared.
    fixed = (
        {*ORG_SUFFIXES, *REGION_KINDS, *EVENT_KINDS}
        | {k for _, kinds in INDUSTRIES for k in kinds}
        | {w for form in OUTLET_FORMS for w in form.split() if w != "{}"}
    )
    shared = {w for w, c in Counter(w for n in names for w in n.split()).items() if c > 1}
    assert shared <= fixed
    for entity in world.entities:
        assert any(w not in shared for w in entity.name.split())
        assert all(a not in names or a == entity.name for a in entity.aliases)


@pytest.mark.parametrize("key", ["tiny", "small", "medium", "small-seed1", "small-seed2", "small-seed3"])
def test_every_gold_fact_is_stated_in_the_gold_documents(corpora, key):
    dataset, world = corpora[key]
    docs = {d.doc_id: d for d in dataset.documents}
    for q in dataset.questions:
        gold = [docs[d] for d in q.gold_doc_ids]
        text = " ".join(d.text for d in gold)
        must_appear = q.answers if q.question_type == "contradictory" else q.answers[:1]
        assert all(mentions(text, a) for a in must_appear), q
        assert all(mentions(text, e) for e in q.gold_entities), q
        stated = {r for d in gold for r in d.metadata["relation_ids"]}
        for edge in q.gold_edges:
            both = [d for d in gold if mentions(d.text, edge.source) and mentions(d.text, edge.target)]
            assert both, (q, edge)
            assert {r.id for r in relation_for(world, edge)} & stated, (q, edge)


def test_each_relation_is_one_sentence_in_one_document(corpora):
    dataset, world = corpora["small"]
    names = {e.id: e.name for e in world.entities}
    _, relations = world_tables(world, dataset)
    assert (relations["doc_ids"].map(len) == 1).all()
    texts = {d.doc_id: d.text for d in dataset.documents}
    for row in relations.itertuples():
        text = texts[row.doc_ids[0]]
        assert mentions(text, names[row.source_id]) and mentions(text, names[row.target_id])


@pytest.mark.parametrize("key", ["small", "medium", "small-seed2"])
def test_multi_hop_chains_cross_documents(corpora, key):
    multi = [q for q in corpora[key][0].questions if q.question_type == "multi_hop"]
    assert {q.metadata["hops"] for q in multi} == {2, 3}
    for q in multi:
        assert len(q.gold_edges) == q.metadata["hops"]
        assert len(set(q.gold_doc_ids)) == q.metadata["hops"] >= 2
        for first, second in zip(q.gold_edges, q.gold_edges[1:], strict=False):  # a connected path
            assert {first.source, first.target} & {second.source, second.target}


@pytest.mark.parametrize("key", ["small", "medium"])
def test_temporal_questions_rest_on_time_bounded_facts(corpora, key):
    dataset, world = corpora[key]
    docs = {d.doc_id: d.text for d in dataset.documents}
    temporal = [q for q in dataset.questions if q.question_type == "temporal"]
    assert len({q.metadata["kind"] for q in temporal}) >= 4
    for q in temporal:
        for edge in q.gold_edges:
            (rel,) = relation_for(world, edge)
            assert rel.valid_from is not None
            assert any(str(rel.valid_from) in docs[d] for d in q.gold_doc_ids)
        if q.metadata["kind"] in ("ceo_in_year", "employer_in_year"):
            assert rel.valid_from < q.metadata["year"] < (rel.valid_to or LAST_YEAR + 1)
            assert str(q.metadata["year"]) in q.question


@pytest.mark.parametrize("key", ["small", "medium"])
def test_contradictory_questions_cite_two_disagreeing_sources(corpora, key):
    dataset, _ = corpora[key]
    docs = {d.doc_id: d for d in dataset.documents}
    contradictory = [q for q in dataset.questions if q.question_type == "contradictory"]
    assert contradictory
    for q in contradictory:
        claims = q.metadata["claims"]
        assert len(q.answers) == len(set(q.answers)) == len(claims) == 2
        assert len(set(q.metadata["sources"])) == 2 and len(set(q.gold_doc_ids)) == 2
        for claim in claims:
            assert docs[claim["doc_id"]].source == claim["source"]
            assert mentions(docs[claim["doc_id"]].text, claim["value"])


@pytest.mark.parametrize("key", ["small", "medium"])
def test_summary_questions_reference_every_fact_about_their_entity(corpora, key):
    dataset, world = corpora[key]
    names = {e.id: e.name for e in world.entities}
    summaries = [q for q in dataset.questions if q.question_type == "summary"]
    assert {q.metadata["kind"] for q in summaries} == {"organization_profile", "person_profile"}
    for q in summaries:
        subject = next(n for n in names.values() if mentions(q.question, n))
        about = [r for r in world.relations if subject in (names[r.source], names[r.target])]
        assert q.answers == [] and len(q.reference_summaries) == 1
        reference = q.reference_summaries[0]
        assert len(q.gold_edges) == len(about) == reference.count(". ") + 1  # one sentence per fact
        assert all(
            mentions(reference, names[r.source]) and mentions(reference, names[r.target]) for r in about
        )
        contested = [
            r
            for r in about
            if r.type in ("born_in", "headquartered_in")
            and sum(o.type == r.type and o.source == r.source for o in world.relations) > 1
        ]
        assert reference.count("according to") == len(contested)


@pytest.mark.parametrize("key", ["tiny", "small", "medium", "small-seed1"])
def test_every_question_carries_the_key_facts_of_its_answer(corpora, key):
    dataset, _ = corpora[key]
    for q in dataset.questions:
        assert q.key_facts and all(f.endswith(".") for f in q.key_facts), q
        if q.question_type in ("single_hop", "multi_hop", "temporal"):
            (fact,) = q.key_facts  # the final answer stated as one fact
            assert mentions(fact, q.answers[0]), q
        elif q.question_type == "contradictory":  # one fact per conflicting claim, with its outlet
            assert [c["value"] for c in q.metadata["claims"]] == q.answers
            for fact, claim in zip(q.key_facts, q.metadata["claims"], strict=True):
                assert fact.startswith(f"According to {claim['source']}, ") and mentions(fact, claim["value"])
        else:  # summaries: one fact per stated relation, the reference's sentences
            assert len(q.key_facts) == len(q.gold_edges)
            assert " ".join(q.key_facts) == q.reference_summaries[0]


@pytest.mark.parametrize("size", ["tiny", "small", "medium"])
def test_presets_give_their_sizes(corpora, size):
    dataset, world = corpora[size]
    preset = PRESETS[size]
    assert dataset.name == "generated"
    assert len(dataset.documents) == preset["n_documents"]
    assert len({d.doc_id for d in dataset.documents}) == len(dataset.documents)
    counts = Counter(q.question_type for q in dataset.questions)
    assert counts == {
        t: preset[f"n_{t}"] for t in ("single_hop", "multi_hop", "temporal", "contradictory", "summary")
    }
    assert len({q.question_id for q in dataset.questions}) == len(dataset.questions)
    words = [len(d.text.split()) for d in dataset.documents]
    assert 120 <= sum(words) / len(words) <= 200
    for doc in dataset.documents:
        assert doc.source in world.outlets and re.fullmatch(r"\d{4}-\d\d-\d\d", doc.date)


def test_large_preset_is_big_enough_for_the_retrieval_benchmark(large):
    dataset, world = large
    assert len(dataset.documents) == PRESETS["large"]["n_documents"] >= 2000
    names = [e.name for e in world.entities]
    assert len(names) == len(set(names))
    # Every word is at least one token, so chunks of 64 words bound chunks of 64 tokens from below
    # (with cl100k tokens the corpus gives ~12,900 chunks of 128).
    assert sum(math.ceil(len(d.text.split()) / 64) for d in dataset.documents) >= 10_000
    assert len(dataset.questions) == sum(
        PRESETS["large"][f"n_{t}"]
        for t in ("single_hop", "multi_hop", "temporal", "contradictory", "summary")
    )


def test_world_tables_are_the_gold_graph(corpora):
    dataset, world = corpora["small"]
    entities, relations = world_tables(world, dataset)
    assert list(entities.columns) == ["entity_id", "name", "type", "description", "aliases"]
    assert list(relations.columns) == [
        "relation_id",
        "source_id",
        "target_id",
        "relation",
        "valid_from",
        "valid_to",
        "sources",
        "doc_ids",
    ]
    assert len(entities) == len(world.entities) and len(relations) == len(world.relations)
    assert set(relations["source_id"]) | set(relations["target_id"]) <= set(entities["entity_id"])
    assert str(relations["valid_from"].dtype) == "Int64"
    timed = set(relations.dropna(subset="valid_from")["relation"])
    assert {"ceo_of", "works_for", "founded", "acquired"} <= timed
    assert (world_tables(world)[1]["doc_ids"].map(len) == 0).all()  # no dataset, no document ids


def test_render_options_and_errors(corpora):
    _, world = corpora["tiny"]
    with pytest.raises(ValueError, match="n_documents"):
        render_corpus(world, n_documents=1)
    one_per_profile = render_corpus(world, n_single_hop=1, n_multi_hop=1, n_temporal=1, n_contradictory=1)
    assert len(one_per_profile.documents) > PRESETS["tiny"]["n_documents"]
    with pytest.warns(UserWarning, match="contradictory"):
        render_corpus(world, 8, n_contradictory=50)
    dataset, _ = generate_corpus({"n_documents": 20, "n_multi_hop": 4})
    assert len(dataset.documents) == 20
    assert Counter(q.question_type for q in dataset.questions)["multi_hop"] == 4
    with pytest.raises(ValueError, match="unknown size"):
        generate_corpus("huge")
    with pytest.raises(ValueError):
        generate_world(n_people=3, n_orgs=2)


def test_diagnostics_preset_reaches_the_seeds_200_to_500_questions_across_four_categories():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a shortfall of any kind would warn
        dataset, _ = generate_corpus("diagnostics")
    counts = Counter(q.question_type for q in dataset.questions)
    four = {t: counts[t] for t in ("single_hop", "multi_hop", "temporal", "contradictory")}
    assert four == {"single_hop": 100, "multi_hop": 100, "temporal": 100, "contradictory": 80}
    assert 200 <= sum(four.values()) <= 500
    assert all(q.key_facts for q in dataset.questions)
