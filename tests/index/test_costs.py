"""What each part of a built index cost (`index.costs`), the build's labelled embedding calls, and
re-indexing one changed document: computed from the per-chunk costs, checked against a rebuild.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest
from test_build import context

from ragtrial.data.experiment_dataset import load_experiment_dataset
from ragtrial.index.build import build_index
from ragtrial.index.costs import (
    LLM_EXTRACTION_STAGES,
    REINDEX_BASIS,
    UNLABELLED,
    part_costs,
    reindex_costs,
    reindex_summary,
    uncapped_extraction,
)
from ragtrial.index.embed_index import report_origins


def built(scripted, tmp_path, notebook: str = "build", **index):
    ctx = context(scripted, tmp_path, notebook, **index)
    dataset = load_experiment_dataset(ctx.settings.data)
    return ctx, dataset, build_index(ctx, dataset)


def test_each_graphs_embeddings_are_their_own_call_and_the_vectors_are_unchanged(scripted, tmp_path) -> None:
    ctx, _, index = built(scripted, tmp_path)
    labels = {row["method"] for row in index.manifest["ledger"] if row["stage"] == "index_embeddings"}
    assert labels == {
        "chunks",
        "entities:nlp",
        "entities:llm",
        "community_reports:nlp",
        "community_reports:llm",
    }
    # before the labels, each table was one call: the same texts in one call give the same vectors
    entity_texts = [
        f"{n}: {d}" for n, d in zip(index.entities["name"], index.entities["description"], strict=True)
    ]
    report_texts = [
        f"{t}: {s}"
        for t, s in zip(index.community_reports["title"], index.community_reports["summary"], strict=True)
    ]
    assert set(report_origins(index)) == {"nlp", "llm"}
    for texts, array in (
        (list(index.chunks["text"]), index.chunk_embeddings),
        (entity_texts, index.entity_embeddings),
        (report_texts, index.report_embeddings),
    ):
        whole = ctx.embedder.embed(texts, stage="one call per table")
        np.testing.assert_array_equal(array, whole / np.linalg.norm(whole, axis=1, keepdims=True))


def test_the_parts_add_up_to_the_manifest(scripted, tmp_path) -> None:
    _, _, index = built(scripted, tmp_path)
    manifest, parts = index.manifest, part_costs(index)
    ledger, stages = pd.DataFrame(manifest["ledger"]), pd.DataFrame(manifest["stages"])
    assert list(zip(parts["part"], parts["origin"], strict=True)) == [
        ("chunks", ""),
        ("chunk_embeddings", ""),
        ("graph", "nlp"),
        ("graph", "llm"),
        ("communities", "nlp"),
        ("communities", "llm"),
        ("community_reports", "nlp"),
        ("community_reports", "llm"),
        ("entity_embeddings", "nlp"),
        ("entity_embeddings", "llm"),
        ("report_embeddings", "nlp"),
        ("report_embeddings", "llm"),
    ]
    embedded = ledger["stage"] == "index_embeddings"
    assert parts["calls"].sum() == ledger["calls"].sum() == stages["calls"].sum()
    assert (
        parts["live_calls"].sum() == (ledger["calls"] - ledger["cached"]).sum() == stages["live_calls"].sum()
    )
    assert parts["prompt_tokens"].sum() == ledger.loc[~embedded, "prompt_tokens"].sum()
    assert parts["completion_tokens"].sum() == ledger["completion_tokens"].sum()
    assert parts["embedding_tokens"].sum() == ledger.loc[embedded, "prompt_tokens"].sum()
    assert parts["model_s"].sum() == pytest.approx(ledger["latency_s"].sum())
    assert parts["wall_s"].sum() == pytest.approx(stages["wall_s"].sum())
    llm = ledger[ledger["stage"].isin(LLM_EXTRACTION_STAGES)]
    graph_llm = parts.set_index(["part", "origin"]).loc[("graph", "llm")]
    assert (
        graph_llm["calls"] == llm["calls"].sum() and graph_llm["prompt_tokens"] == llm["prompt_tokens"].sum()
    )
    basis = parts.set_index(["part", "origin"])["basis"].to_dict()
    assert basis[("chunks", "")] == "measured"
    assert basis[("communities", "nlp")] == "apportioned by entities"
    assert basis[("community_reports", "llm")] == "apportioned by ledger latency"
    assert basis[("graph", "nlp")] == "extract_nlp: measured; date_relations: apportioned by relations"


def test_embeddings_built_before_the_labels_are_one_unsplit_part(scripted, tmp_path) -> None:
    _, _, index = built(scripted, tmp_path)
    ledger = pd.DataFrame(index.manifest["ledger"])
    embedded = ledger["stage"] == "index_embeddings"
    old = ledger[embedded].drop(columns="method").sum(numeric_only=True).to_dict()
    rows = [*ledger[~embedded].to_dict("records"), {**old, "stage": "index_embeddings", "method": ""}]
    legacy = dataclasses.replace(index, manifest={**index.manifest, "ledger": rows})
    parts = part_costs(legacy).set_index("part")
    assert not parts.index.str.endswith("_embeddings").any()
    assert parts.loc[UNLABELLED, "basis"] == "not split: built before embedding labels"
    assert parts.loc[UNLABELLED, "calls"] == old["calls"]
    assert parts["wall_s"].sum() == pytest.approx(part_costs(index)["wall_s"].sum())


def test_a_manifest_without_stages_or_ledger_is_refused_by_name(scripted, tmp_path) -> None:
    _, _, index = built(scripted, tmp_path, graph_source="nlp")
    for key in ("stages", "ledger"):
        manifest = {k: v for k, v in index.manifest.items() if k != key}
        with pytest.raises(ValueError, match=rf"index {index.manifest['config_hash']}: .*'{key}'"):
            part_costs(dataclasses.replace(index, manifest=manifest))


def test_the_uncapped_extraction_is_projected_from_the_attempted_chunks(scripted, tmp_path) -> None:
    _, _, index = built(scripted, tmp_path)
    manifest = index.manifest
    note = manifest["llm_extraction"]
    assert (note["attempted_chunks"], note["chunks"]) == (3, 8)
    projected = uncapped_extraction(manifest)
    llm = [row for row in manifest["ledger"] if row["stage"] in LLM_EXTRACTION_STAGES]
    assert projected["calls"] == pytest.approx(sum(r["calls"] for r in llm) * 8 / 3)
    assert projected["basis"] == "projected" and projected["chunks"] == 8
    assert uncapped_extraction({**manifest, "llm_extraction": {**note, "skipped_chunk_ids": []}}) is None


def test_reindexing_one_document_costs_what_a_rebuild_after_its_edit_pays(scripted, tmp_path) -> None:
    """The rebuild replays the unchanged chunks from the cache: its live LLM extraction calls are the
    edited document's, which `reindex_costs` computed from the first build's per-chunk costs.
    """
    _, dataset, index = built(scripted, tmp_path)
    costs = reindex_costs(index)
    assert set(costs["basis"]) == {REINDEX_BASIS}
    extraction = costs[(costs["part"] == "graph") & (costs["origin"] == "llm")].set_index("doc_id")
    edited = extraction["calls"].idxmax()  # a document the capped extraction read
    assert extraction.loc[edited, "chunks"] >= 1

    def renamed(text: str) -> str:  # a text change that keeps the length in tokens, names changed
        first = re.search(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b", text).group(0)
        return text.replace(first, "Zed Quorum")

    documents = [
        d.model_copy(update={"text": renamed(d.text)}) if d.doc_id == edited else d for d in dataset.documents
    ]
    ctx = context(scripted, tmp_path, "edited")
    rebuilt = build_index(ctx, dataset.model_copy(update={"documents": documents}))
    assert rebuilt.manifest["config_hash"] != index.manifest["config_hash"]  # documents' fingerprint
    assert len(rebuilt.chunks) == len(index.chunks)  # the same chunk sample is LLM-extracted
    live = ctx.ledger.frame()
    live = live[~live["cached"].astype(bool)]
    assert (live["stage"].isin(LLM_EXTRACTION_STAGES)).sum() == extraction.loc[edited, "calls"]

    summary = reindex_summary(costs).set_index(["part", "origin"])
    assert summary.loc[("graph", "llm"), "calls_max"] == extraction["calls"].max()
    assert summary.loc[("graph", "llm"), "calls_mean"] == pytest.approx(extraction["calls"].mean())
