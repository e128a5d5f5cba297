"""Question generators (sampling, provenance, failures), dedup, entity linking and distribution
metrics, relevance ratings. LLM text comes from the scripted server: what is checked is the logic
around it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED_DATASETS, batch_runs, make_llm
from retrieval.test_retrieval import CHAIN, CHAIN_MENTIONS, EMBEDDER, graph_index

from ragtrial.config.base import ParamsError
from ragtrial.config.claims import ClaimsSettings
from ragtrial.config.data import data_path
from ragtrial.config.judge import JudgeSettings
from ragtrial.config.questions import QuestionsSettings
from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.config.systems import UpstreamComparisonSettings
from ragtrial.data.experiment_dataset import load_experiment_dataset
from ragtrial.data.synthetic import generate_corpus
from ragtrial.evaluation.diagnostics import category_of
from ragtrial.index.chunk_documents import chunk_documents
from ragtrial.index.create_communities import create_communities
from ragtrial.index.extract_nlp_graph import extract_nlp_graph
from ragtrial.index.import_graphs import import_graphrag_output
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.hashing_embedder import HashingEmbedder
from ragtrial.questions.corpus_questions import dataset_description, persona_questions, summary_questions
from ragtrial.questions.graph_questions import graph_questions, sample_edges, sample_nodes, sample_walks
from ragtrial.questions.quality import (
    MENTION_COLUMNS,
    compare_generators,
    entity_distribution,
    entity_mentions,
    make_entity_linker,
    rate_relevance,
    retrieve_contexts,
    top_entities,
)
from ragtrial.questions.run_generators import dedup_counts, deduplicate, ground_truth_questions
from ragtrial.questions.sampling import (
    claims_dataset_questions,
    claims_questions,
    diagnosed_questions,
    judge_questions,
    judged_questions,
    qa_questions,
)
from ragtrial.retrieval.base import RetrieverParts
from ragtrial.retrieval.registry import make_retriever

CAROL_INDEX = SHARED_DATASETS / "graphrag_examples" / "a_christmas_carol_index"


def fake_embed(texts: list[str]) -> np.ndarray:
    """Deterministic bag of character trigrams, L2-normalized: similar strings get high cosine."""
    out = np.zeros((len(texts), 512), dtype=np.float32)
    for row, text in enumerate(texts):
        padded = f"  {text.lower()} "
        for i in range(len(padded) - 2):
            out[row, int(hashlib.md5(padded[i : i + 3].encode()).hexdigest(), 16) % 512] += 1
    return out / np.linalg.norm(out, axis=1, keepdims=True).clip(min=1e-9)


def first_user_turn(body: dict) -> str:
    """The prompt itself (a repair round appends turns after it)."""
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


CORPUS_DESCRIPTION = "Short reports about fictional companies and people, read to follow their dealings."


def structured_reply(body: dict) -> str:
    """A valid reply for whatever the question prompts ask, varied by the request content."""
    text = body["messages"][-1]["content"]
    tag = hashlib.md5(text.encode()).hexdigest()[:6]
    schema = body.get("response_format", {}).get("schema", {})
    props = schema.get("properties", {})
    if "question" in props:
        return json.dumps({"question": f"What does the text say about item {tag}?"})
    for key in ("questions", "items"):
        if key in props:
            n = props[key]["minItems"]
            return json.dumps({key: [f"Generated {key} number {i} for {tag}?" for i in range(n)]})
    if "score" in props:
        return json.dumps({"score": int(tag, 16) % 6})
    if "description" in props:
        return json.dumps({"description": CORPUS_DESCRIPTION})
    return f"A short summary of chunk {tag}."


@pytest.fixture
def llm(scripted, tmp_path):
    scripted.default_reply = structured_reply
    return make_llm(scripted.base_url, tmp_path)


@pytest.fixture(scope="module")
def small_index() -> tuple[GraphIndex, object]:
    dataset, _ = generate_corpus("tiny", seed=0)
    docs = dataset.documents_frame()
    chunks = chunk_documents(docs, 200, 20)
    entities, relations = extract_nlp_graph(chunks)
    communities = create_communities(entities, relations)
    return GraphIndex(
        documents=docs, chunks=chunks, entities=entities, relations=relations, communities=communities
    ), dataset


# ---------------------------------------------------------------- the done-means check


@pytest.mark.skipif(not CAROL_INDEX.is_dir(), reason="shared Christmas Carol GraphRAG index not present")
def test_graph_questions_on_the_christmas_carol_index_have_valid_provenance_and_long_walks(llm):
    index = import_graphrag_output(CAROL_INDEX)
    cfg = QuestionsSettings(per_level=5, min_hops=50, temperature=None)
    generated = graph_questions(llm, index, cfg)
    q = generated.questions
    assert generated.failures.empty, generated.failures.to_dict("records")
    assert q.groupby("level").size().to_dict() == {"node": 5, "edge": 5, "subgraph": 5}
    entity_ids, chunk_ids = set(index.entities["entity_id"]), set(index.chunks["chunk_id"])
    relations = index.relations.set_index("relation_id")
    for row in q.itertuples():
        assert row.entity_ids and set(row.entity_ids) <= entity_ids
        assert set(row.relation_ids) <= set(relations.index)
        assert row.chunk_ids and set(row.chunk_ids) <= chunk_ids
        assert row.input_chunk_ids and set(row.input_chunk_ids) <= set(row.chunk_ids)
        assert set(row.doc_ids) <= set(index.documents["doc_id"])
        assert row.prompt == f"questions_{row.level}@v1" and row.anchor_id
        # every relation in the provenance joins two entities of the provenance
        ends = relations.loc[row.relation_ids, ["source_id", "target_id"]].to_numpy().ravel()
        assert set(ends) <= set(row.entity_ids)
    node, edge, sub = (q[q["level"] == lv] for lv in ("node", "edge", "subgraph"))
    assert all(len(ids) == 1 for ids in node["entity_ids"]) and all(len(r) == 0 for r in node["relation_ids"])
    assert all(len(ids) == 1 for ids in edge["relation_ids"])
    assert (sub["distinct_hops"] >= 50).all() and (sub["walk_steps"] >= sub["distinct_hops"]).all()
    assert all(len(set(ids)) >= 2 for ids in sub["entity_ids"]) and all(
        len(r) >= 50 for r in sub["relation_ids"]
    )
    # summaries were generated for the subgraph chunks before the subgraph questions
    assert q["question_id"].is_unique and len(generated.questions) == 15


# ---------------------------------------------------------------- sampling


def test_samples_are_seeded_and_a_smaller_count_is_a_prefix(small_index):
    index, _ = small_index
    assert sample_nodes(index, 3, 0) == sample_nodes(index, 6, 0)[:3]
    assert sample_edges(index, 3, 0) == sample_edges(index, 6, 0)[:3]
    assert sample_nodes(index, 5, 0) != sample_nodes(index, 5, 1)
    cfg = QuestionsSettings(min_hops=5)
    assert sample_walks(index, 2, cfg) == sample_walks(index, 3, cfg)[:2]


def test_a_walk_below_the_hop_threshold_is_resampled_then_recorded_as_failed(llm):
    # two components: a triangle (3 edges) and a 6-cycle (6 edges)
    ring = [("a", "b"), ("b", "c"), ("c", "a")] + [(f"r{i}", f"r{(i + 1) % 6}") for i in range(6)]
    names = sorted({n for edge in ring for n in edge})
    entities = pd.DataFrame(
        {
            "entity_id": names,
            "name": names,
            "type": "x",
            "description": "d",
            "chunk_ids": [["c1"]] * len(names),
            "degree": 2,
            "origin": "nlp",
        }
    )
    relations = pd.DataFrame(
        {
            "relation_id": [f"e{i}" for i in range(len(ring))],
            "source_id": [a for a, _ in ring],
            "target_id": [b for _, b in ring],
            "description": "linked",
            "weight": 1.0,
            "chunk_ids": [["c1"]] * len(ring),
        }
    )
    chunks = pd.DataFrame(
        {"chunk_id": ["c1"], "doc_id": ["d1"], "position": [0], "text": ["text"], "n_tokens": [1]}
    )
    index = GraphIndex(chunks=chunks, entities=entities, relations=relations)
    walks = sample_walks(index, 8, QuestionsSettings(min_hops=5, max_walk_attempts=50))
    assert all(w is not None and len(w.edges) >= 5 and w.nodes[0].startswith("r") for w in walks)
    assert any(w.attempts > 1 for w in walks)  # some seeds fell in the triangle and were resampled
    cfg = QuestionsSettings(levels=["subgraph"], per_level=2, min_hops=7, temperature=None)
    generated = graph_questions(llm, index, cfg)
    assert generated.questions.empty
    assert list(generated.failures["kind"]) == ["walk_too_small"] * 2


# ---------------------------------------------------------------- other generators


def test_persona_generator_makes_k_by_n_by_m_questions_with_provenance(llm, small_index):
    index, dataset = small_index
    cfg = QuestionsSettings(personas=3, tasks_per_persona=2, questions_per_task=2, temperature=None)
    generated = persona_questions(llm, index.documents, cfg)
    q = generated.questions
    assert len(q) == 3 * 2 * 2 and generated.failures.empty
    assert q.groupby(["persona", "task"]).size().eq(2).all() and q["persona"].nunique() == 3
    assert (q["prompt"] == "questions_persona_questions@v2").all() and q["question_id"].is_unique
    assert all(ids == list(index.documents["doc_id"][: len(ids)]) and ids for ids in q["doc_ids"])


def test_persona_prompts_see_a_corpus_description_never_the_corpus(scripted, tmp_path, small_index):
    """GraphRAG's Algorithm 1 starts from a high-level description of the corpus ("avoid generating
    questions from the corpus itself"): the description call alone sees a sample of the corpus.
    """
    index, _ = small_index
    scripted.default_reply = structured_reply
    cfg = QuestionsSettings(personas=2, tasks_per_persona=1, questions_per_task=2, temperature=None)
    sentences = {
        s.strip() for text in index.documents["text"] for s in text.split(".") if len(s.strip()) > 20
    }

    def shows_corpus(prompt: str) -> bool:
        return any(sentence in prompt for sentence in sentences)

    generated = persona_questions(make_llm(scripted.base_url, tmp_path / "generated"), index.documents, cfg)
    assert len(generated.questions) == 2 * 1 * 2 and generated.failures.empty
    describe, *persona_prompts = [first_user_turn(r["body"]) for r in scripted.chat_requests()]
    assert "at most 80 words" in describe and shows_corpus(describe)
    assert len(persona_prompts) == 1 + 2 + 2  # personas, tasks per persona, questions per task
    assert all(CORPUS_DESCRIPTION in p and not shows_corpus(p) for p in persona_prompts)

    given = "Transcripts of a technology podcast, read by journalists following the industry."
    sent = len(scripted.chat_requests())
    cfg = cfg.model_copy(update={"corpus_description": given})
    generated = persona_questions(make_llm(scripted.base_url, tmp_path / "given"), index.documents, cfg)
    prompts = [first_user_turn(r["body"]) for r in scripted.chat_requests()[sent:]]
    assert len(prompts) == 5 and len(generated.questions) == 4  # no description call
    assert all(given in p and CORPUS_DESCRIPTION not in p and not shows_corpus(p) for p in prompts)
    assert all(ids == [] for ids in generated.questions["doc_ids"])  # written from no document


def test_persona_failures_are_recorded_and_not_turned_into_questions(scripted, tmp_path, small_index):
    index, _ = small_index

    def reply(body):  # the tasks call for one persona never parses, nor does its repair round
        text = first_user_turn(body)
        return "not json" if "tasks this user" in text and "number 1" in text else structured_reply(body)

    scripted.default_reply = reply
    cfg = QuestionsSettings(personas=2, tasks_per_persona=1, questions_per_task=3, temperature=None)
    generated = persona_questions(make_llm(scripted.base_url, tmp_path), index.documents, cfg)
    assert len(generated.questions) == 3 and set(generated.questions["persona"]) == {
        generated.questions["persona"].iloc[0]
    }
    assert generated.failures[["item_id", "stage", "kind"]].to_dict("records") == [
        {"item_id": "persona-1", "stage": "questions_persona_tasks", "kind": "parse"}
    ]


def test_summary_based_questions_come_from_the_head_and_tail_description(llm, small_index, scripted):
    index, _ = small_index
    cfg = QuestionsSettings(
        summary_questions=5, summary_per_call=2, head_tokens=5, tail_tokens=5, description_max_tokens=40
    )
    description, used = dataset_description(index.documents, 5, 5, 40)
    assert len(used) == 4 and len(description.splitlines()) == 4  # 10 tokens per document, 40 in all
    generated = summary_questions(llm, index.documents, cfg)
    assert len(generated.questions) == 5 and all(ids == used for ids in generated.questions["doc_ids"])
    bodies = [r["body"] for r in scripted.chat_requests()]
    assert len(bodies) == 3 and len({b["seed"] for b in bodies}) == 3 and bodies[0]["temperature"] == 0.7
    assert all(description in b["messages"][-1]["content"] for b in bodies)


def test_a_question_over_the_length_cap_is_counted_as_too_long_and_no_cap_keeps_it(
    scripted, tmp_path, small_index
):
    index, _ = small_index
    long_question = (
        "Which of the firms named in the corpus " + "and in its many reports " * 6 + "was founded first?"
    )
    scripted.default_reply = lambda body: json.dumps({"questions": [long_question, "Who founded Acme?"]})
    llm = make_llm(scripted.base_url, tmp_path)
    capped = summary_questions(
        llm, index.documents, QuestionsSettings(summary_questions=2, summary_per_call=2)
    )
    assert capped.questions.empty
    assert capped.failures[["stage", "kind"]].values.tolist() == [["questions_summary_based", "too_long"]]
    uncapped = summary_questions(
        llm,
        index.documents,
        QuestionsSettings(summary_questions=2, summary_per_call=2, question_max_chars=None),
    )
    assert uncapped.failures.empty and uncapped.questions["question"].tolist()[0] == long_question
    assert not uncapped.questions["at_length_cap"].any()
    at_cap = summary_questions(
        llm,
        index.documents,
        QuestionsSettings(summary_questions=2, summary_per_call=2, question_max_chars=len(long_question)),
    )
    assert at_cap.questions["at_length_cap"].tolist() == [True, False]


def test_ground_truth_questions_keep_gold_and_link_entities(small_index):
    index, dataset = small_index
    generated = ground_truth_questions(dataset.questions, index, per_category=2, seed=0)
    q = generated.questions
    assert q.groupby("level").size().to_dict() == {
        "contradictory": 2,
        "multi_hop": 2,
        "single_hop": 2,
        "temporal": 2,
    }
    gold = {x.question_id: x for x in dataset.questions}
    known = set(index.entities["entity_id"])
    for row in q.itertuples():
        assert (
            row.answers == gold[row.question_id].answers and row.doc_ids == gold[row.question_id].gold_doc_ids
        )
        assert set(index.chunks.set_index("chunk_id").loc[row.chunk_ids, "doc_id"]) == set(row.doc_ids)
        assert row.entity_ids and set(row.entity_ids) <= known and row.anchor_id == row.entity_ids[0]


# ---------------------------------------------------------------- dedup


def test_dedup_removes_exact_and_near_duplicates_within_a_generator_and_counts_them():
    questions = pd.DataFrame(
        {
            "question_id": list("abcdef"),
            "generator": ["s", "s", "s", "s", "g", "g"],
            "question": [
                "Who founded Acme?",
                "who founded ACME",
                "Who founded Acme Corp?",
                "Where is Acme?",
                "Who founded Acme?",
                "Where is Acme based?",
            ],
        }
    )
    kept, dropped = deduplicate(questions, fake_embed, threshold=0.75)
    assert list(kept["question_id"]) == ["a", "d", "e", "f"]
    assert dropped[["question_id", "kind", "duplicate_of"]].values.tolist() == [
        ["b", "exact", "a"],
        ["c", "near", "a"],
    ]
    counts = dedup_counts(questions, dropped).set_index("generator")
    assert counts.loc["s"].tolist() == [4, 1, 1, 2] and counts.loc["g"].tolist() == [2, 0, 0, 2]


# ---------------------------------------------------------------- entities and distribution


def entity_index() -> GraphIndex:
    names = ["Lailmam Systems", "Lailmam", "Girmain", "Fourguk Group"]
    chunks = pd.DataFrame(
        {"chunk_id": ["c1"], "doc_id": ["d1"], "position": [0], "text": ["t"], "n_tokens": [1]}
    )
    entities = pd.DataFrame(
        {
            "entity_id": [f"e{i}" for i in range(1, 5)],
            "name": names,
            "type": "",
            "description": "",
            "chunk_ids": [["c1"]] * 4,
            "degree": 0,
            "origin": "nlp",
        }
    )
    return GraphIndex(chunks=chunks, entities=entities)


QUESTIONS = pd.DataFrame(
    {
        "question_id": ["q1", "q2"],
        "generator": "g",
        "level": "node",
        "question": ["Who founded Lailmam Systems in Girmain?", "Which firm bought Fourguk Groups?"],
    }
)


def test_ngram_linker_takes_the_longest_exact_match_and_embedding_matches():
    # The linker picks the source; the index is already the questions' graph, so the graph that
    # retrieval walks (here one the index does not hold) does not narrow it.
    retrieval = RetrievalSettings(entity_source="llm", link_threshold=0.7, ngram_max=3, graph_origin="llm")
    linker = make_entity_linker(entity_index(), RetrieverParts(HashingEmbedder()), retrieval, "ngram")
    mentions, failures = entity_mentions(QUESTIONS, linker, "ngram")
    assert failures.empty
    assert mentions[["question_id", "entity_id", "how"]].values.tolist() == [
        ["q1", "e1", "exact"],
        ["q1", "e3", "exact"],
        ["q2", "e4", "embedding"],
    ]


def test_llm_linker_failures_are_recorded_and_the_question_has_no_mentions(scripted, tmp_path):
    scripted.default_reply = lambda body: (
        '{"entities": ["Girmain"]}' if "Girmain" in first_user_turn(body) else "no JSON here"
    )
    parts = RetrieverParts(HashingEmbedder(), make_llm(scripted.base_url, tmp_path))
    linker = make_entity_linker(entity_index(), parts, RetrievalSettings(), "llm")
    mentions, failures = entity_mentions(QUESTIONS, linker, "llm")
    assert mentions[["question_id", "entity_id", "linker"]].values.tolist() == [["q1", "e3", "llm"]]
    assert failures[["item_id", "stage", "kind"]].values.tolist() == [["q2", "question_entities", "parse"]]


def test_llm_linker_counts_every_listed_entity_and_reports_the_linked_share_apart(scripted, tmp_path):
    # seed 000, Section V-A counts the entities the LLM extracts: one outside the graph still counts
    listed = {"q1": ["Girmain", "Lailmam Systems", "Zorbex Quarry"], "q2": ["Zorbex Quarry"]}
    scripted.default_reply = lambda body: json.dumps(
        {"entities": listed["q1" if "Girmain" in first_user_turn(body) else "q2"]}
    )
    parts = RetrieverParts(HashingEmbedder(), make_llm(scripted.base_url, tmp_path))
    linker = make_entity_linker(entity_index(), parts, RetrievalSettings(link_threshold=0.99), "llm")
    mentions, failures = entity_mentions(QUESTIONS, linker, "llm")
    assert failures.empty and mentions["question_id"].tolist() == ["q1", "q1", "q1", "q2"]
    assert mentions[["question_id", "entity", "entity_id", "how"]].values.tolist() == [
        ["q1", "e3", "e3", "exact"],
        ["q1", "e1", "e1", "exact"],
        ["q1", "unlinked:zorbex quarry", "", "unlinked"],
        ["q2", "unlinked:zorbex quarry", "", "unlinked"],
    ]
    no_communities = pd.DataFrame({"community_id": [], "level": [], "entity_ids": []})
    row = entity_distribution(mentions, QUESTIONS, {"llm": set()}, entity_index().entities, no_communities, 0)
    row = row.iloc[0]
    assert row["distinct_entities"] == 3 and row["distinct_linked_entities"] == 2
    assert row["top_entity"] == "Zorbex Quarry" and row["top_question_share"] == 1.0
    assert row["linked_mentions"] == 2 and row["linked_share"] == 0.5 and row["entity_coverage"] == 0.5


def test_distribution_metrics_on_a_hand_made_table():
    # generator g: A in q1 and q2, B in q1, C in q3, nothing in q4 -> shares 1/2, 1/4, 1/4 -> 1.5 bits
    rows = [
        ("q1", "g", "e1", "A"),
        ("q1", "g", "e2", "B"),
        ("q2", "g", "e1", "A"),
        ("q3", "g", "e3", "C"),
        ("q5", "h", "e1", "A"),
    ]
    mentions = pd.DataFrame(
        [(q, g, "node", "ngram", name, eid, eid, name, "exact", 1.0) for q, g, eid, name in rows],
        columns=MENTION_COLUMNS,
    )
    questions = pd.DataFrame({"question_id": ["q1", "q2", "q3", "q4", "q5"], "generator": ["g"] * 4 + ["h"]})
    entities = pd.DataFrame({"entity_id": [f"e{i}" for i in range(1, 5)]})
    communities = pd.DataFrame(
        {"community_id": ["0", "1", "2"], "level": [0, 0, 1], "entity_ids": [["e1"], ["e4"], ["e2"]]}
    )
    table = entity_distribution(mentions, questions, {"ngram": set()}, entities, communities, 0).set_index(
        "generator"
    )
    g = table.loc["g"]
    assert g["questions"] == 4 and g["questions_with_entity"] == 3 and g["mentions"] == 4
    assert g["distinct_entities"] == 3 and g["top_entity"] == "A" and g["top_share"] == 0.5
    assert g["top_question_share"] == 0.5 and g["entropy_bits"] == pytest.approx(1.5)
    assert g["entity_coverage"] == 0.75
    assert g["community_coverage"] == 0.5  # level 0: community 0 reached (e1), community 1 (e4) not
    assert table.loc["h", "entropy_bits"] == 0.0 and table.loc["h", "top_question_share"] == 1.0
    failed = entity_distribution(mentions, questions, {"ngram": {"q4"}}, entities, communities, 0)
    assert failed.set_index("generator").loc["g", "questions"] == 3
    # no question (every generation call failed): an empty table with the columns the report reads
    none = entity_distribution(
        mentions.iloc[:0], questions.iloc[:0], {"ngram": set()}, entities, communities, 0
    )
    assert none.empty and list(none.columns) == list(failed.columns)
    top = top_entities(mentions, k=2)
    assert top[top["generator"] == "g"][["entity", "count"]].values.tolist() == [
        ["A", 2],
        ["B", 1],
        ["other (1 entities)", 1],
    ]


# ---------------------------------------------------------------- relevance


def test_unparseable_relevance_ratings_are_recorded_not_scored(scripted, tmp_path):
    def reply(body):
        text = first_user_turn(body)
        if "Question: bad" in text:
            return '{"score": 9}'  # out of the 0-5 range, also after the repair round
        return json.dumps({"score": int(re.search(r"Question: q(\d)", text).group(1))})

    scripted.default_reply = reply
    questions = pd.DataFrame(
        {
            "question_id": ["a", "b", "c"],
            "generator": ["g", "g", "h"],
            "level": "node",
            "anchor_id": "",
            "question": ["q3", "bad", "q0"],
        }
    )
    ratings, failures = rate_relevance(
        make_llm(scripted.base_url, tmp_path), questions, {"a": "ctx", "b": "ctx", "c": "ctx"}, max_tokens=24
    )
    assert ratings[["question_id", "score"]].values.tolist() == [["a", 3], ["c", 0]]
    assert failures[["item_id", "stage", "kind"]].values.tolist() == [["b", "rate_relevance", "parse"]]


def test_generator_comparison_pairs_on_shared_anchors_else_says_unpaired():
    rng = np.random.default_rng(0)
    anchors = [f"x{i}" for i in range(8)]
    paired = pd.DataFrame(
        {
            "question_id": [f"{g}{a}" for g in "ab" for a in anchors],
            "generator": ["a"] * 8 + ["b"] * 8,
            "level": "node",
            "anchor_id": anchors * 2,
            "score": list(rng.integers(3, 6, 8)) + list(rng.integers(0, 3, 8)),
        }
    )
    row = compare_generators(paired).iloc[0]
    assert row["design"].startswith("paired on 8") and row["mean_diff"] > 0 and row["supported"]
    unpaired = paired.assign(anchor_id=[""] * 16)
    row = compare_generators(unpaired).iloc[0]
    assert row["design"].startswith("unpaired") and np.isnan(row["ci_low"]) and row["supported"]
    assert "(n=8)" in row["evidence"] and row["verdict"].endswith("the intervals do not overlap.")
    few = compare_generators(unpaired, min_n=10).iloc[0]
    assert not few["supported"] and few["verdict"].endswith("no claim.")


# ---------------------------------------------------------------- the real embedded model


@pytest.mark.usefixtures("embedded_model")
def test_embedded_model_node_question_and_rating_parse_or_are_recorded(small_index, tmp_path):
    from ragtrial.config.llm import LLMSettings
    from ragtrial.llm.cache import ResponseCache
    from ragtrial.llm.client import LLM
    from ragtrial.llm.ledger import Ledger
    from ragtrial.llm.server import EmbeddedServer

    index, _ = small_index
    settings = LLMSettings()
    server = EmbeddedServer(settings, tmp_path / "server.log")
    base_url = server.start()
    try:
        llm = LLM(settings, ResponseCache(tmp_path / "c.sqlite"), Ledger("t"), lambda: base_url)
        generated = graph_questions(
            llm, index, QuestionsSettings(levels=["node"], per_level=1, chunk_tokens=120)
        )
        assert len(generated.questions) + len(generated.failures) == 1  # a question or a recorded failure
        questions = (
            generated.questions
            if len(generated.questions)
            else pd.DataFrame(
                {
                    "question_id": ["q"],
                    "generator": "g",
                    "level": "node",
                    "anchor_id": "",
                    "question": ["Who is Nufeil?"],
                }
            )
        )
        ratings, failures = rate_relevance(
            llm, questions.head(1), {questions["question_id"].iloc[0]: "Nufeil is a city."}, max_tokens=24
        )
        assert len(ratings) + len(failures) == 1 and ratings["score"].between(0, 5).all()
    finally:
        server.stop()


def test_claims_questions_are_persona_questions_or_say_the_data_set_stood_in(scripted, tmp_path, small_index):
    index, dataset = small_index
    llm = make_llm(scripted.base_url, tmp_path)
    cfg = QuestionsSettings(personas=1, tasks_per_persona=1, questions_per_task=3, temperature=None)
    scripted.default_reply = structured_reply
    questions, failures, fell_back = claims_questions(llm, dataset, ClaimsSettings(n_questions=2), cfg)
    assert len(questions) == 2 and {q.question_type for q in questions} == {"persona"}
    assert failures.empty and not fell_back
    scripted.default_reply = lambda body: "not json"  # every persona call fails, and its repair round
    fresh = make_llm(scripted.base_url, tmp_path / "fresh")  # its own cache: the successes are not there
    questions, failures, fell_back = claims_questions(fresh, dataset, ClaimsSettings(n_questions=2), cfg)
    assert fell_back and len(questions) == 2 and set(failures["kind"]) == {"parse"}
    assert all(q in dataset.questions for q in questions)
    own, failures, fell_back = claims_questions(llm, dataset, ClaimsSettings(question_source="dataset"), cfg)
    assert not fell_back and failures.empty and all(q in dataset.questions for q in own)


def test_a_data_set_question_source_without_questions_names_the_key_to_set(scripted, tmp_path, small_index):
    index, dataset = small_index
    bare = dataset.model_copy(update={"questions": []})  # a folder of text files has none
    cfg = QuestionsSettings(personas=1, tasks_per_persona=1, questions_per_task=1, temperature=None)
    for settings, section in (
        (JudgeSettings(), "judge"),
        (UpstreamComparisonSettings(question_source="dataset"), "upstream"),
    ):
        with pytest.raises(
            ParamsError, match=rf"key '{section}.question_source'.*set {section}.question_source: graph"
        ):
            judge_questions(None, bare, index, settings, cfg, section)
    with pytest.raises(ParamsError, match="set claims.question_source: persona"):
        claims_questions(None, bare, ClaimsSettings(question_source="dataset"), cfg)
    # the data set's own questions, when it has them, need no model
    assert judge_questions(None, dataset, index, JudgeSettings(), cfg)[0]
    # a generated source whose every call fails yields no question and its failures (the report counts them)
    scripted.default_reply = lambda body: "not json"
    llm = make_llm(scripted.base_url, tmp_path)
    none, failures = judge_questions(llm, bare, index, JudgeSettings(question_source="graph"), cfg)
    assert none == [] and len(failures) and set(failures["kind"]) == {"parse"}
    persona, failures, fell_back = claims_questions(llm, bare, ClaimsSettings(), cfg)
    assert persona == [] and fell_back and len(failures)


def test_the_plan_of_summary_questions_is_the_requests_they_send(scripted, tmp_path):
    """`ragtrial estimate` finds every summary call in the cache once they were made (one request spec)."""
    from ragtrial.questions.run_generators import planned_generation

    dataset, _ = generate_corpus("small", seed=0)
    documents = dataset.documents_frame()
    cfg = QuestionsSettings(summary_questions=5, summary_per_call=2, temperature=0.7)
    llm = make_llm(scripted.base_url, tmp_path)
    (before,) = planned_generation(llm, documents, cfg, ["summary"])
    assert not scripted.requests  # planning sends nothing
    summary_questions(llm, documents, cfg)
    sent = len(scripted.requests)
    (after,) = planned_generation(llm, documents, cfg, ["summary"])
    assert (before.calls, before.cached) == (3, 0)
    assert after.cached == after.calls == 3 and len(scripted.requests) == sent


def test_the_plan_of_the_corpus_description_is_the_request_it_sends(scripted, tmp_path, small_index):
    """`ragtrial estimate` plans the one description call exactly and finds it cached once made; a
    given description plans none.
    """
    from ragtrial.questions.run_generators import planned_generation

    index, _ = small_index
    scripted.default_reply = structured_reply
    cfg = QuestionsSettings(personas=1, tasks_per_persona=1, questions_per_task=1, temperature=0.7)
    llm = make_llm(scripted.base_url, tmp_path)
    before = planned_generation(llm, index.documents, cfg, ["persona"])[0]
    assert before.stage == "questions_corpus_description" and (before.calls, before.cached) == (1, 0)
    persona_questions(llm, index.documents, cfg)
    after = planned_generation(llm, index.documents, cfg, ["persona"])[0]
    assert after.cached == after.calls == 1
    given = cfg.model_copy(update={"corpus_description": "A corpus of reports about companies and people."})
    stages = [p.stage for p in planned_generation(llm, index.documents, given, ["persona"])]
    assert stages == ["questions_personas", "questions_persona_tasks", "questions_persona_questions"]


SEED000_BATCHES = (
    "paper_questions",
    "paper_judge",
    "paper_upstream_systems",
    "paper_scale_study",
    "paper_calibration",
)


def sized_walk_index(n: int = 150) -> GraphIndex:
    """`n` entities on a ring with chords (degree 6, so walks of 50 distinct hops are found), each
    citing its own chunk and the next one; every chunk is about 1,500 tokens, longer than the clip.
    """
    edges = [(i, (i + step) % n) for i in range(n) for step in (1, 7, 31)]
    names = [f"e{i:03d}" for i in range(n)]
    entities = pd.DataFrame(
        {
            "entity_id": names,
            "name": [f"Entity {i}" for i in range(n)],
            "type": "x",
            "description": "d",
            "chunk_ids": [[f"c{i:03d}", f"c{(i + 1) % n:03d}"] for i in range(n)],
            "degree": 6,
            "origin": "nlp",
        }
    )
    relations = pd.DataFrame(
        {
            "relation_id": [f"r{k:03d}" for k in range(len(edges))],
            "source_id": [names[a] for a, _ in edges],
            "target_id": [names[b] for _, b in edges],
            "description": "linked",
            "weight": 1.0,
            "chunk_ids": [[f"c{a:03d}"] for a, _ in edges],
        }
    )
    chunks = pd.DataFrame(
        {
            "chunk_id": [f"c{i:03d}" for i in range(n)],
            "doc_id": "d1",
            "position": range(n),
            "text": [f"Chunk {i}." + " fact" * 1500 for i in range(n)],
            "n_tokens": 1503,
        }
    )
    return GraphIndex(chunks=chunks, entities=entities, relations=relations)


def test_the_shared_seed000_question_sizes_reach_the_graph_generators_prompts(scripted, tmp_path):
    """Seed 000 §III-A through `params/shared/seed000_questions.yaml`, which every seed-000 batch reads
    (`settings_from`): run the graph generator at a batch's resolved question settings and read what
    its prompts carry: node questions two whole chunks (1,200-token clips), a subgraph question the
    summary of every chunk its walk's entities and relations come from (each asked for up to 300
    tokens, of a 1,200-token clip) and up to 60 of the walk's entities and relations.
    """
    from ragtrial.llm.tokens import count_tokens

    sections = []
    for batch in SEED000_BATCHES:
        sections += [spec.settings.questions for spec in batch_runs(f"params/{batch}.yaml")]
    fields = ["min_hops", "source_chunks", "chunk_tokens", "summary_chunks", "summary_max_tokens"]
    fields += ["prompt_entities", "prompt_relations"]
    sizes = {tuple(getattr(q, f) for f in fields) for q in sections}
    assert sizes == {(50, 2, 1200, 1000, 300, 60, 60)}  # one question setting for every seed-000 run
    cfg = sections[0].model_copy(update={"per_level": 1})  # the sizes are per question: one per level
    scripted.default_reply = structured_reply
    llm = make_llm(scripted.base_url, tmp_path)
    generated = graph_questions(llm, sized_walk_index(), cfg)
    assert generated.failures.empty
    questions = generated.questions.set_index("level")
    bodies = [r["body"] for r in scripted.chat_requests()]

    def asked(prompt_start: str) -> list[dict]:
        return [b for b in bodies if first_user_turn(b).startswith(prompt_start)]

    def clipped_tokens(text: str) -> int:
        assert text.endswith(" ...")  # the clip's marker: each chunk was cut
        return count_tokens(text.removesuffix(" ..."))

    (node,) = asked("Entity: ")
    source = first_user_turn(node).split("Source text:\n", 1)[1].split("\n\nWrite one question", 1)[0]
    assert [clipped_tokens(piece) for piece in source.split("\n\n")] == [1200, 1200]  # 2 chunks, 1,200 each
    summaries = asked("Summarize the following text")
    subgraph = questions.loc["subgraph"]
    assert len(summaries) == len(subgraph["chunk_ids"]) == len(subgraph["input_chunk_ids"]) > 3
    assert {b["max_tokens"] for b in summaries} == {300}
    assert {
        clipped_tokens(first_user_turn(b).split("Text:\n", 1)[1].split("\n\nSummary:")[0]) for b in summaries
    } == {1200}
    (ask,) = asked("Entities:\n")
    prompt = first_user_turn(ask)
    entity_lines = prompt.split("Entities:\n", 1)[1].split("\n\nRelations:", 1)[0].splitlines()
    relation_lines = prompt.split("Relations:\n", 1)[1].split("\n\nSummaries", 1)[0].splitlines()
    assert subgraph["distinct_hops"] >= 50
    assert len(entity_lines) == min(60, len(subgraph["entity_ids"])) > 20
    # All of a walk's relations at 50 distinct hops (the old default showed 20 of each)
    assert len(relation_lines) == min(60, len(subgraph["relation_ids"])) >= 50
    assert prompt.count("- A short summary of chunk") == len(summaries)


def test_the_description_of_a_document_is_its_head_after_the_offset_and_its_last_tokens():
    # seed 000's questions.head_offset_tokens / head_tokens / tail_tokens as paper_questions.yaml sets
    # them: LightRAG's head slice (tokens 1000-2000) and the paper's tail (the last 1,000 tokens)
    cfg = batch_runs("params/paper_questions.yaml")[0].settings.questions
    text = "apple " * 1000 + "banana " * 1500 + "cherry " * 1500
    documents = pd.DataFrame({"doc_id": ["d0"], "title": [""], "text": [text]})
    description, used = dataset_description(
        documents, cfg.head_tokens, cfg.tail_tokens, cfg.description_max_tokens, cfg.head_offset_tokens
    )
    words = description.split()
    assert used == ["d0"] and "apple" not in words  # the first 1,000 tokens are skipped
    assert abs(words.count("banana") - 1000) <= 1 and abs(words.count("cherry") - 1000) <= 1


@pytest.mark.parametrize(
    ("params", "run", "asked", "categories"),
    [
        # seed 002: Experiment 2 answers, and Experiment 1 judges, every one of the podcast's 125 questions
        ("params/paper_claims.yaml", "08_claims_comprehensiveness_diversity", claims_dataset_questions,
         {"global": 125}),
        ("params/paper_graphrag_experiment1.yaml", "07_pairwise_method_comparison", judged_questions,
         {"global": 125}),
        # seed 001: every question of the 100-question MuSiQue sample
        ("params/paper_graph_walk.yaml", "headline", qa_questions, {"2hop": 68, "3hop": 27, "4hop": 5}),
        # seed 004: every question of the four categories, and MuSiQue's hop types as multi-hop
        ("params/paper_diagnostics.yaml", "generated corpus", diagnosed_questions,
         {"single_hop": 100, "multi_hop": 100, "temporal": 100, "contradictory": 80}),
        ("params/paper_diagnostics.yaml", "MuSiQue", diagnosed_questions, {"multi_hop": 100}),
    ],
)  # fmt: skip
def test_a_paper_run_asks_every_question_of_its_data_set(params, run, asked, categories):
    """The questions a paper run's notebook asks (its registry sampler, the call the notebook makes)
    under the batch's resolved settings, on the shared data: all of the data set's questions of the
    types it asks, none sampled away, each under the category its report groups it by.
    """
    (spec,) = [s for s in batch_runs(params) if s.notebook == run or s.label.startswith(run)]
    data = spec.settings.data
    if data.dataset != "generated" and not data_path(data.path).is_dir():
        pytest.skip(f"the shared {data.path} folder is absent (real-data tests need the shared data)")
    dataset = load_experiment_dataset(data)
    chosen = asked(dataset, spec.settings)
    category = {q.question_id: category_of(q.question_type, spec.settings.diagnostics) for q in chosen}
    assert Counter(category.values()) == categories
    types = {q.question_type for q in chosen}
    assert chosen == [q for q in dataset.questions if q.question_type in types]  # none sampled away


def test_seed000s_judged_questions_are_the_graph_generators_not_the_data_sets(llm, small_index):
    """Seed 000 §VI-A (`params/paper_judge.yaml`, judge.question_source graph): the questions notebooks
    06 and 07 judge are the graph-text-grounded ones, their level as their type, even on a data set
    with questions of its own (walks shortened to fit the tiny corpus's graph).
    """
    index, dataset = small_index
    (settings,) = [s.settings for s in batch_runs("params/paper_judge.yaml") if s.notebook.startswith("07")]
    questions_cfg = settings.questions.model_copy(update={"per_level": 2, "min_hops": 3})
    judged, failures = judge_questions(llm, dataset, index, settings.judge, questions_cfg)
    assert dataset.questions and failures.empty
    assert Counter(q.question_type for q in judged) == {"node": 2, "edge": 2, "subgraph": 2}
    assert not {q.question for q in judged} & {q.question for q in dataset.questions}


def test_seed000s_relevance_is_rated_on_fast_graphrags_context_of_each_question(scripted, tmp_path):
    """Seed 000 §V-B (`params/paper_questions.yaml`, notebook 03: questions.relevance.retriever
    fastgraphrag with the model listing the question's entities): fast-graphrag's retrieval from the
    entities the model named builds each question's context, and the rating request shows that context.
    """
    (settings,) = [
        s.settings for s in batch_runs("params/paper_questions.yaml") if s.notebook.startswith("03")
    ]
    rel = settings.questions.relevance

    def model(body: dict) -> str:
        props = body["response_format"]["schema"]["properties"]
        return json.dumps({"entities": ["Durmask"]} if "entities" in props else {"score": 4})

    scripted.default_reply = model
    llm = make_llm(scripted.base_url, tmp_path)
    index = graph_index(CHAIN, CHAIN_MENTIONS)
    retriever = make_retriever(rel.retriever, index, RetrieverParts(EMBEDDER, llm), settings.retrieval)
    questions = pd.DataFrame(
        {
            "question_id": ["q1"],
            "question": ["Who works with others?"],
            "generator": ["graph"],
            "level": ["node"],
        }
    )
    contexts, failures = retrieve_contexts(retriever, questions, rel.k, rel.context_max_tokens)
    context = contexts.loc[0, "context"]
    assert failures.empty and contexts.loc[0, "items"] > 0 and "Durmask" in context
    ratings, failures = rate_relevance(llm, questions, {"q1": context}, rel.max_tokens)
    assert failures.empty and ratings["score"].tolist() == [4]
    assert list(llm.ledger.frame()["stage"]) == ["question_entities", "rate_relevance"]
    assert context in scripted.chat_requests()[-1]["body"]["messages"][-1]["content"]
