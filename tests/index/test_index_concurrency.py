"""The index build's LLM stages (extraction with gleaning and claims, description summaries,
community reports) fan out up to llm.concurrency: the same tables, failures and cache keys at any
concurrency, and the requests really overlap.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

import pandas as pd
from conftest import endpoint_settings, make_llm
from scripted_server import InFlight
from test_build import assert_same_tables

from ragtrial.config.index import IndexSettings
from ragtrial.data.experiment_dataset import load_experiment_dataset
from ragtrial.index.build import build_index, index_path
from ragtrial.index.extract_llm_graph import extract_llm_graph
from ragtrial.runner.context import open_run


def tag(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()[:6]


def fails(text: str) -> bool:
    """The requests that never parse (nor does their repair round): about one in six."""
    return int(tag(text), 16) % 6 == 0


def user_turns(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def stage_of(body: dict) -> str:
    """Which index stage a request belongs to, read from its prompt."""
    first, last = user_turns(body)[0], user_turns(body)[-1]
    if "missed in the last extraction" in last:
        return "glean_graph"
    if "Entity types:" in first:
        return "extract_graph"
    if "extract every claim" in first:
        return "extract_claims"
    if "community of entities" in first:
        return "community_report"
    if "one comprehensive description" in first:
        return "summarize_descriptions"
    return "other"


def model(body: dict) -> str:
    """Replies that depend only on the request: people named in the chunk, chained; a gleaning round
    finds one more entity in some chunks; claims about the first entity; reports titled by their context.
    """
    first, stage = user_turns(body)[0], stage_of(body)
    text = first.rsplit("Text:\n", 1)[-1]
    if stage == "extract_graph":
        if fails(text) or "Unreadable" in text:
            return "not json"
        names = list(dict.fromkeys(re.findall(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b", text)))[:5]
        return json.dumps(
            {
                "entities": [
                    {"name": n, "type": "person", "description": f"{n} as chunk {tag(text)} tells"}
                    for n in names
                ],
                "relations": [
                    {"source": a, "target": b, "description": f"{a} with {b} ({tag(text)})", "strength": 3}
                    for a, b in zip(names, names[1:], strict=False)
                ],
            }
        )
    if stage == "glean_graph":
        found = (
            []
            if int(tag(text), 16) % 2
            else [{"name": f"Glean {tag(text)}", "type": "event", "description": "x"}]
        )
        return json.dumps({"entities": found, "relations": []})
    if stage == "extract_claims":
        subject = first.split("Entities: ")[-1].split(",")[0].split("\n")[0]
        claim = {
            "subject": subject,
            "object": "NONE",
            "claim_type": "MENTION",
            "status": "TRUE",
            "start_date": None,
            "end_date": None,
            "description": f"mentioned in {tag(text)}",
        }
        return json.dumps({"claims": [claim]})
    if stage == "community_report":
        if fails(first):
            return "not json"
        return json.dumps(
            {
                "title": f"Community {tag(first)}",
                "summary": "People.",
                "rating": int(tag(first), 16) % 11,
                "rating_explanation": "low",
                "findings": [{"summary": "f", "explanation": "e"}],
            }
        )
    return f"A merged description {tag(first)}."


def run(scripted, folder: Path, concurrency: int):
    llm = {"fold_system": False, "concurrency": concurrency, "backoff_initial_s": 0.01, "backoff_max_s": 0.05}
    index = {
        "graph_source": "llm",
        "chunk_size": 120,
        "chunk_overlap": 20,
        "max_gleanings": 2,
        "claims": True,
        "llm_max_chunks": None,
        "max_cluster_size": 4,
        "max_reports": None,
        "max_items": 8,
        "text_max_chars": None,
        "report_levels": None,
        "report_context_tokens": 400,
    }
    settings = endpoint_settings(scripted.base_url, folder, llm=llm, data={"size": "tiny"}, index=index)
    ctx = open_run(settings, folder / "run", notebook="test")
    dataset = load_experiment_dataset(ctx.settings.data)
    index = build_index(ctx, dataset)
    manifest = json.loads((index_path(ctx, dataset) / "manifest.json").read_text())
    with sqlite3.connect(folder / "cache.sqlite") as conn:
        keys = {key for (key,) in conn.execute("SELECT key FROM completions")}
    return index, manifest, keys


def test_the_index_is_the_same_at_any_concurrency(scripted, tmp_path) -> None:
    scripted.default_reply = model
    one, manifest_one, keys_one = run(scripted, tmp_path / "one", 1)
    eight, manifest_eight, keys_eight = run(scripted, tmp_path / "eight", 8)
    # the build exercised every stage, a failing chunk included
    failures = one.extraction_failures
    assert (failures["stage"] == "extract_graph").sum() >= 2 and len(one.entities) > 10
    assert len(one.claims) and len(one.community_reports) > 2 and one.communities["level"].nunique() > 1
    extraction = manifest_one["llm_extraction"]
    assert extraction["gleaning_rounds"] > extraction["attempted_chunks"] - extraction["failed_chunks"]
    assert extraction["description_summaries"]["summarized"] > 2
    reports = manifest_one["community_reports"]
    assert reports["reused"] and reports["failed"] and any(c["sub_reports"] for c in reports["contexts"])

    assert_same_tables(one, eight)
    assert keys_one == keys_eight
    for note in ("llm_extraction", "community_reports"):
        assert manifest_one[note] == manifest_eight[note]


def test_the_index_stages_send_their_calls_concurrently(scripted, tmp_path) -> None:
    recorder = InFlight(model, hold_s=0.1, kind_of=stage_of)
    scripted.default_reply = recorder
    run(scripted, tmp_path, 8)
    for stage in (
        "extract_graph",
        "glean_graph",
        "extract_claims",
        "summarize_descriptions",
        "community_report",
    ):
        assert recorder.most[stage] > 1, (stage, dict(recorder.most))


def test_a_recurring_chunk_text_replays_the_cache_as_at_concurrency_one(scripted, tmp_path) -> None:
    # Two chunks with one text make one request: run together they would both go live, and the
    # failure of the second would no longer say it was replayed from the cache.
    scripted.default_reply = InFlight(model, hold_s=0.05, kind_of=stage_of)
    texts = [
        "Unreadable Page here.",
        "Unreadable Page here.",
        "Ada Lind met Bo Carr.",
        "Ada Lind met Bo Carr.",
    ]
    chunks = pd.DataFrame({"chunk_id": [f"c{i}" for i in range(4)], "text": texts})
    settings = IndexSettings(max_gleanings=1, claims=True)
    graphs = []
    for concurrency in (1, 8):
        llm = make_llm(scripted.base_url, tmp_path / str(concurrency), concurrency=concurrency)
        graphs.append(extract_llm_graph(llm, chunks, settings))
    one, eight = graphs
    assert one.failures["chunk_id"].tolist() == ["c0", "c1"] and "replayed" in one.failures["detail"][1]
    for table in ("entities", "relations", "claims", "failures"):
        pd.testing.assert_frame_equal(getattr(one, table), getattr(eight, table))
    assert one.stats == eight.stats
