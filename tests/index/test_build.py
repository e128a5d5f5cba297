"""Index build orchestration: determinism, reuse of the saved index, manifest, imports, origins."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import networkx as nx
import pandas as pd
import pytest
from conftest import SHARED_DATASETS, batch_runs, endpoint_settings
from pydantic import ValidationError

from ragtrial.config.data import DataSettings
from ragtrial.data import load_dataset
from ragtrial.data.experiment_dataset import load_experiment_dataset
from ragtrial.index import build
from ragtrial.index.build import (
    build_index,
    failed_model_calls,
    index_path,
    load_or_build_document_indexes,
    load_or_build_index,
)
from ragtrial.index.inspect import (
    chunk_outcomes,
    communities_per_level,
    coverage_summary,
    gold_graph_scores,
    gold_hits,
    hubs,
    relation_recall_difference,
    ungrounded,
    with_origin,
)
from ragtrial.index.tables import SCHEMAS, GraphIndex, config_hash, produced_columns, select_origin
from ragtrial.llm.middleware import RETRY_FAILURES_ENV
from ragtrial.records import Dataset, Document, Question
from ragtrial.runner.context import open_run

CAROL_INDEX = SHARED_DATASETS / "graphrag_examples" / "a_christmas_carol_index"
CAROL_TEXT = SHARED_DATASETS / "gutenberg_christmas_carol"


def scripted_model(body: dict) -> str:
    """Extraction: the first capitalized word pairs of the chunk as people, chained; reports: fixed JSON."""
    asked = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if "Entity types:" in asked:
        names = list(
            dict.fromkeys(re.findall(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b", asked.rsplit("Text:\n", 1)[1]))
        )[:3]
        return json.dumps(
            {
                "entities": [{"name": n, "type": "person", "description": f"named {n}"} for n in names],
                "relations": [
                    {"source": a, "target": b, "description": f"{a} with {b}", "strength": 3}
                    for a, b in zip(names, names[1:], strict=False)
                ],
            }
        )
    if "community of entities" in asked:
        return json.dumps(
            {
                "title": "A community",
                "summary": "People.",
                "rating": 3,
                "rating_explanation": "low",
                "findings": [{"summary": "f", "explanation": "e"}],
            }
        )
    return "A merged description."


def context(scripted, tmp_path, notebook: str = "test", **index):
    scripted.default_reply = scripted_model
    settings = endpoint_settings(
        scripted.base_url,
        tmp_path,
        llm={"fold_system": False},
        data={"size": "tiny"},
        index={"llm_max_chunks": 3, **index},
    )
    return open_run(settings, tmp_path / notebook, notebook=notebook)


def assert_same_tables(a: GraphIndex, b: GraphIndex) -> None:
    for table in SCHEMAS:
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table))
    for attr in ("chunk_embeddings", "entity_embeddings", "report_embeddings"):
        assert (getattr(a, attr) == getattr(b, attr)).all()


def test_build_is_deterministic_reused_and_described_by_its_manifest(scripted, tmp_path) -> None:
    ctx = context(scripted, tmp_path)
    dataset = load_experiment_dataset(ctx.settings.data)
    first = build_index(ctx, dataset)
    live = len(scripted.chat_requests())
    assert live > 3  # three extraction calls, summaries and reports

    rebuilt = build_index(context(scripted, tmp_path, "other"), dataset)  # a new run, the same cache
    assert len(scripted.chat_requests()) == live  # everything replayed from the cache
    assert_same_tables(first, rebuilt)

    again = context(scripted, tmp_path, "third")
    loaded = load_or_build_index(again, dataset)
    assert again.ledger.frame().empty  # the saved index was loaded, no call at all
    assert_same_tables(first, loaded)

    path = index_path(ctx, dataset)
    manifest = json.loads((path / "manifest.json").read_text())
    assert path.name == manifest["config_hash"] == config_hash(manifest["settings"])
    assert (
        manifest["settings"]["index"]["graph_source"] == "both"
        and "store_path" not in manifest["settings"]["index"]
    )
    assert (
        manifest["settings"]["llm"]["model"] == "scripted"
        and "extract_graph@v1" in manifest["settings"]["prompts"]
    )
    assert manifest["settings"]["documents"] == manifest["source_fingerprint"]
    assert manifest["counts"]["entities"] == len(first.entities) and manifest["counts"]["chunks"] == 8
    stages = {row["stage"]: row for row in manifest["stages"]}
    assert list(stages) == [
        "chunk",
        "extract_nlp",
        "extract_llm",
        "communities",
        "community_reports",
        "date_relations",
        "embeddings",
    ]
    assert (
        stages["chunk"]["calls"] == 0
        and stages["date_relations"]["calls"] == 0
        and stages["extract_llm"]["calls"] >= 3
    )
    assert stages["extract_llm"]["live_calls"] == 0  # the file is the rebuild's, replayed from the cache
    assert first.manifest["stages"][2]["live_calls"] >= 3
    assert {row["stage"] for row in manifest["ledger"]} >= {
        "extract_graph",
        "community_report",
        "index_embeddings",
    }
    assert (
        manifest["llm_extraction"]["attempted_chunks"] == 3
        and len(manifest["llm_extraction"]["skipped_chunk_ids"]) == 5
    )
    assert manifest["data_settings"]["size"] == "tiny"

    other = index_path(context(scripted, tmp_path, "x", chunk_size=256, chunk_overlap=50), dataset)
    assert other != path  # one --set away is another index


def test_an_index_saved_before_a_new_build_step_is_another_index(scripted, tmp_path, monkeypatch) -> None:
    """Old indexes lack what a new step adds (relation validity): the step list is in the identity."""
    ctx = context(scripted, tmp_path)
    dataset = load_experiment_dataset(ctx.settings.data)
    path = index_path(ctx, dataset)
    monkeypatch.setattr(build, "STAGES", [s for s in build.STAGES if s[0] != "date_relations"])
    assert index_path(ctx, dataset) != path


def test_one_index_per_document_answers_each_question_from_its_own_document(scripted, tmp_path) -> None:
    ctx = context(scripted, tmp_path, graph_source="nlp")
    dataset = load_experiment_dataset(ctx.settings.data)
    first, second = (d.doc_id for d in dataset.documents[:2])
    questions = [
        Question(question_id=f"q{i}", question="Summarize.", reference_summaries=["x"], gold_doc_ids=[doc])
        for i, doc in enumerate([first, second, first])
    ]
    parts = load_or_build_document_indexes(ctx, dataset, questions)
    assert not ctx.ledger.frame().empty  # two builds, each paid (reports, embeddings)
    assert [(doc, [q.question_id for q in own]) for doc, _, own in parts] == [
        (first, ["q0", "q2"]),
        (second, ["q1"]),
    ]
    for doc, index, _ in parts:
        assert index.documents["doc_id"].tolist() == [doc] and set(index.chunks["doc_id"]) == {doc}
    again = context(scripted, tmp_path, "again", graph_source="nlp")
    load_or_build_document_indexes(again, dataset, questions)
    assert again.ledger.frame().empty  # each document's index was saved and is loaded, not rebuilt
    both = questions[0].model_copy(update={"gold_doc_ids": [first, second]})
    with pytest.raises(ValueError, match=r"question 'q0' .* needs exactly one gold document"):
        load_or_build_document_indexes(ctx, dataset, [both])


def wait_until(condition, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.fault
def test_an_index_being_built_is_waited_for_and_loaded_not_built_twice(
    scripted, tmp_path, caplog, monkeypatch
):
    first = context(scripted, tmp_path, "first")
    release = threading.Event()
    scripted.default_reply = lambda body: (release.wait(60), scripted_model(body))[1]
    # The second builder's requests carry another key, so the server tells the two builds apart.
    monkeypatch.setenv("RAGTRIAL_SECOND_BUILDER", "second")
    values = first.settings.model_dump(mode="json")
    values["llm"]["api_key_env"] = "RAGTRIAL_SECOND_BUILDER"
    second = open_run(values, tmp_path / "second", notebook="second")
    dataset = load_experiment_dataset(first.settings.data)

    def second_paid() -> bool:
        return any(r["authorization"] == "Bearer second" for r in scripted.requests)

    with ThreadPoolExecutor(2) as pool:
        built = pool.submit(load_or_build_index, first, dataset)
        wait_until(lambda: scripted.chat_requests())  # the first build is under way
        loaded = pool.submit(load_or_build_index, second, dataset)
        wait_until(lambda: "which is building the index" in caplog.text or second_paid())
        release.set()
        first_index, second_index = built.result(timeout=120), loaded.result(timeout=120)
    assert "which is building the index" in caplog.text and not second_paid()
    assert second.ledger.frame().empty  # loaded what the first build saved
    assert_same_tables(first_index, second_index)


def test_both_keeps_the_two_graphs_apart(scripted, tmp_path) -> None:
    ctx = context(scripted, tmp_path)
    index = build_index(ctx, load_experiment_dataset(ctx.settings.data))
    ents = index.entities
    assert set(ents["origin"]) == {"nlp", "llm"}
    assert all(
        eid.startswith(f"{origin}:") for eid, origin in zip(ents["entity_id"], ents["origin"], strict=True)
    )
    origin_of = dict(zip(ents["entity_id"], ents["origin"], strict=True))
    assert all(
        origin_of[s] == origin_of[t]
        for s, t in zip(index.relations["source_id"], index.relations["target_id"], strict=True)
    )
    assert all(len({origin_of[e] for e in ids}) == 1 for ids in index.communities["entity_ids"])
    llm = select_origin(index, "llm")
    assert set(llm.entities["origin"]) == {"llm"} and len(llm.entity_embeddings) == len(llm.entities)
    assert len(llm.relations) + len(select_origin(index, "nlp").relations) == len(index.relations)
    assert len(index.community_reports) == 2  # max_reports=1 per origin
    per_level = communities_per_level(index)
    assert set(per_level["origin"]) == {"nlp", "llm"}
    assert per_level["communities"].sum() == len(index.communities)
    assert set(with_origin(index.community_reports, index)["origin"]) == {"nlp", "llm"}
    top = hubs(index, per_origin=2)
    assert top.groupby("origin").size().max() <= 2
    assert top.groupby("origin")["degree"].apply(lambda d: d.is_monotonic_decreasing).all()
    outcomes = chunk_outcomes(index)
    assert outcomes.groupby("origin")["outcome"].apply(lambda o: (o == "skipped").sum()).to_dict() == {
        "llm": 5,
        "nlp": 0,
    }


@pytest.mark.parametrize("community_input", ["summed", "graphrag"])
def test_community_input_decides_which_entities_leiden_clusters(scripted, tmp_path, community_input) -> None:
    """GraphRAG clusters its graph's largest connected component only (the kit's "graphrag" rule, per
    origin's graph); the kit's "summed" rule clusters every entity, an isolated one in a singleton.
    """
    ctx = context(scripted, tmp_path, community_input=community_input)
    index = build_index(ctx, load_experiment_dataset(ctx.settings.data))
    rels = index.relations
    origin_of = dict(zip(index.entities["entity_id"], index.entities["origin"], strict=True))
    by_origin: dict[str, list[set[str]]] = {}
    graph = nx.Graph(list(zip(rels["source_id"], rels["target_id"], strict=True)))
    for component in sorted(nx.connected_components(graph), key=len, reverse=True):
        by_origin.setdefault(origin_of[next(iter(component))], []).append(component)
    assert set(by_origin) == {"nlp", "llm"}
    assert all(len(c) == 1 or len(c[0]) > len(c[1]) for c in by_origin.values())  # one largest each
    largest = [components[0] for components in by_origin.values()]
    assert len(index.entities) > sum(map(len, largest))  # some entities lie outside them
    for level, rows in index.communities.groupby("level"):
        clustered = sorted(e for ids in rows["entity_ids"] for e in ids)
        expected = set().union(*largest) if community_input == "graphrag" else set(origin_of)
        assert clustered == sorted(expected), f"level {level}"


def test_graphrag_import_reproduces_the_christmas_carol_counts(scripted, tmp_path) -> None:
    if not CAROL_INDEX.is_dir():
        pytest.skip("shared GraphRAG example output not present")
    ctx = context(scripted, tmp_path, graph_source="import", import_path=str(CAROL_INDEX))
    index = build_index(ctx, load_dataset("text_folder", CAROL_TEXT))
    # GraphRAG's 529 entities and the 99 titles its relations and claims name without an entity row
    assert (len(index.entities), len(index.relations), len(index.communities)) == (529 + 99, 978, 122)
    assert len(index.community_reports) == 122 and set(index.entities["origin"]) == {"import"}
    assert index.entity_embeddings.shape[0] == 529 + 99 and index.report_embeddings.shape[0] == 122
    assert scripted.chat_requests() == []  # an import needs no LLM call
    assert index.manifest["imported_from"] == str(CAROL_INDEX) and index.manifest["settings"]["llm"] is None


def test_openie_import_goes_through_communities_and_reports(scripted, tmp_path) -> None:
    docs = [
        Document(doc_id="d1", title="Ada", text="Ada Lind works at Kel Works."),
        Document(doc_id="d2", title="Kel", text="Kel Works is in Tarn."),
    ]
    triples = {
        "docs": [
            {
                "title": "Ada",
                "text": docs[0].text,
                "extracted_triples": [["Ada Lind", "works at", "Kel Works"]],
            },
            {
                "title": "Kel",
                "text": docs[1].text,
                "extracted_triples": [["Kel Works", "is in", "Tarn"], ["broken"]],
            },
        ]
    }
    path = tmp_path / "openie.json"
    path.write_text(json.dumps(triples))
    ctx = context(scripted, tmp_path, graph_source="import", import_path=str(path), reports="none")
    index = build_index(ctx, Dataset(name="toy", documents=docs))
    assert sorted(index.entities["name"]) == ["Ada Lind", "Kel Works", "Tarn"] and len(index.relations) == 2
    assert index.extraction_failures["kind"].tolist() == ["malformed_triple"]
    assert len(index.communities) > 0 and index.community_reports.empty and index.report_embeddings is None


def test_gold_scores_count_only_what_each_origin_read() -> None:
    chunks = pd.DataFrame(
        {
            "chunk_id": ["c0", "c1"],
            "doc_id": ["d0", "d1"],
            "position": [0, 0],
            "text": ["", ""],
            "n_tokens": [1, 1],
        }
    )
    rows = [
        ("nlp:1", "Ada Lind", ["c0"], "nlp"),
        ("nlp:2", "the Kel Works", ["c0"], "nlp"),
        ("nlp:3", "Noise", ["c1"], "nlp"),
        ("llm:1", "Ada Lind", ["c0"], "llm"),
    ]
    entities = pd.DataFrame(
        [(i, n, "", "", c, 0, o) for i, n, c, o in rows], columns=list(SCHEMAS["entities"])
    )
    relations = pd.DataFrame(
        [("r", "nlp:1", "nlp:2", "", 1.0, ["c0"])], columns=produced_columns("relations")
    )
    failures = pd.DataFrame(
        [("c1", "extract_graph", "parse", "x")], columns=list(SCHEMAS["extraction_failures"])
    )
    index = GraphIndex(
        chunks=chunks,
        entities=entities,
        relations=relations,
        extraction_failures=failures,
        manifest={"llm_extraction": {"skipped_chunk_ids": []}},
    )
    gold_e = pd.DataFrame(
        {
            "entity_id": ["g1", "g2", "g3"],
            "name": ["Ada Lind", "Kel Works", "Tarn"],
            "aliases": [[], ["Kel"], []],
        }
    )
    gold_r = pd.DataFrame(
        {
            "relation_id": ["t1", "t2"],
            "source_id": ["g1", "g1"],
            "target_id": ["g2", "g3"],
            "doc_ids": [["d0"], ["d1"]],
        }
    )
    scores = gold_graph_scores(index, gold_e, gold_r).set_index(["origin", "measure"])
    assert scores.loc[("nlp", "entity recall"), ["count", "of"]].tolist() == [2, 3]
    assert scores.loc[("nlp", "entity precision"), ["count", "of"]].tolist() == [2, 3]
    assert scores.loc[("nlp", "relation recall"), ["count", "of"]].tolist() == [1, 2]
    assert scores.loc[("nlp", "relation precision"), ["count", "of"]].tolist() == [1, 1]
    assert scores.loc[("llm", "entity recall"), ["count", "of"]].tolist() == [
        1,
        3,
    ]  # it read c1 too (and failed)
    no_relations = scores.loc[("llm", "relation precision")]
    assert no_relations["of"] == 0 and pd.isna(no_relations["share"])  # undefined, shown as such
    assert ungrounded(index).tolist() == [True, True, True, True]  # the test chunks have no text
    assert (
        not ungrounded(
            dataclasses.replace(index, chunks=chunks.assign(text=["Ada Lind met the Kel Works.", ""]))
        )
        .iloc[:2]
        .any()
    )
    recall, _ = gold_hits(index, gold_e, gold_r)
    # both read both gold relations; NLP found t1, the LLM graph has no relation
    difference, test = relation_recall_difference(index, gold_e, gold_r)
    assert (difference.n, difference.mean) == (2, -0.5)
    assert (test.b01, test.b10, test.p_value) == (1, 0, 1.0)  # one discordant pair: the NLP graph's
    nlp_only = dataclasses.replace(
        select_origin(index, "nlp"), extraction_failures=failures.iloc[:0], manifest={}
    )
    assert relation_recall_difference(nlp_only, gold_e, gold_r) is None
    relations = recall[recall["kind"] == "relation"].set_index(["origin", "item_id"])
    assert relations[["read", "found"]].loc["nlp"].values.tolist() == [[True, True], [True, False]]
    coverage = coverage_summary(chunk_outcomes(index)).set_index(["origin", "measure"])
    assert coverage.loc[("llm", "extraction failed"), ["count", "of", "share"]].tolist() == [1, 2, 0.5]
    assert coverage.loc[("nlp", "no graph (failed or empty)"), "count"] == 0

    sampled = dataclasses.replace(index, manifest={"llm_extraction": {"skipped_chunk_ids": ["c1"]}})
    llm_relations = gold_hits(sampled, gold_e, gold_r)[0].query("origin == 'llm' and kind == 'relation'")
    assert llm_relations["read"].tolist() == [True, False]  # the LLM never read d1
    coverage = coverage_summary(chunk_outcomes(sampled)).set_index(["origin", "measure"])
    assert coverage.loc[("llm", "extraction failed"), ["count", "of", "share"]].tolist() == [0, 1, 0.0]


def test_experiment_dataset_comes_from_the_data_settings() -> None:
    assert len(load_experiment_dataset(DataSettings(size="tiny")).documents) == 8
    with pytest.raises(ValidationError, match="required for data set 'musique'"):  # before any loading
        DataSettings(dataset="musique")


def test_seed001s_index_is_one_extraction_call_per_passage_and_no_report_or_summary(
    scripted, tmp_path
) -> None:
    """Seed 001's `params/paper_graph_walk.yaml` index: each passage whole, one extraction call per
    passage (no gleaning), entities merged by name without description summaries, and no community
    reports: the requests the build sends are the extractions alone.
    """
    cfg = batch_runs("params/paper_graph_walk.yaml")[0].settings.index
    paper = {
        k: getattr(cfg, k) for k in ("chunking", "graph_source", "max_gleanings", "max_summaries", "reports")
    }
    assert paper["reports"] == "none"
    ctx = context(scripted, tmp_path, **paper)
    index = build_index(ctx, load_experiment_dataset(ctx.settings.data))
    asked = [
        next(m["content"] for m in r["body"]["messages"] if m["role"] == "user")
        for r in scripted.chat_requests()
    ]
    assert len(asked) == 3 and all("Entity types:" in a for a in asked)  # llm_max_chunks 3: three passages
    assert index.community_reports.empty and len(index.entities) > 0


@pytest.mark.fault
def test_retry_failures_rebuilds_a_saved_index_whose_extractions_failed_once_per_invocation(
    scripted, tmp_path, monkeypatch
) -> None:
    """`run --force --retry-failures` reused a saved index whose extractions had all failed to parse
    (still 3 of 3 failed), and the later notebooks read it.
    """

    def unparseable_extractions(body: dict) -> str:
        asked = next(m["content"] for m in body["messages"] if m["role"] == "user")
        return "no JSON here" if "Entity types:" in asked else scripted_model(body)

    monkeypatch.delenv(RETRY_FAILURES_ENV, raising=False)
    first = context(scripted, tmp_path, "01_build_index", graph_source="llm")
    scripted.default_reply = unparseable_extractions
    dataset = load_experiment_dataset(first.settings.data)
    failed = load_or_build_index(first, dataset)
    assert failed_model_calls(failed) >= 3 and failed.entities.empty

    scripted.default_reply = scripted_model  # the model now answers in JSON
    again = context(scripted, tmp_path, "01_build_index", graph_source="llm")
    assert failed_model_calls(load_or_build_index(again, dataset)) == failed_model_calls(failed)
    assert again.ledger.frame().empty  # without --retry-failures the saved index is read as it is

    monkeypatch.setenv(RETRY_FAILURES_ENV, "invocation-1")
    before = len(scripted.chat_requests())
    retried = context(scripted, tmp_path, "01_build_index", graph_source="llm")
    rebuilt = load_or_build_index(retried, dataset)
    assert failed_model_calls(rebuilt) == 0 and not rebuilt.entities.empty
    extraction = [r for r in scripted.chat_requests()[before:] if "Entity types:" in str(r["body"])]
    assert len(extraction) == 3  # the failed extractions asked again
    assert rebuilt.manifest["retry_round"] == "invocation-1"

    later = context(scripted, tmp_path, "04_rag_vs_graphrag_qa", graph_source="llm")
    read = load_or_build_index(later, dataset)  # a later notebook of the same invocation
    assert later.ledger.frame().empty and read.manifest["built_by_run"] == rebuilt.manifest["built_by_run"]
    assert_same_tables(rebuilt, read)
