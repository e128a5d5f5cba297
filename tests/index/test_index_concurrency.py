"""The index build's LLM stages (extraction with gleaning and claims, description summaries,
community reports) fan out up to llm.concurrency: the same tables, failures and cache keys at any
concurrency, and the requests really overlap.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
import time
from pathlib import Path

import pandas as pd
from conftest import endpoint_settings, make_llm
from scripted_server import InFlight
from test_build import assert_same_tables
from test_community_reports import community, frame, report_reply, tables

from ragtrial.config.index import IndexSettings
from ragtrial.data.experiment_dataset import load_experiment_dataset
from ragtrial.index.build import build_index, index_path
from ragtrial.index.create_community_reports import create_community_reports
from ragtrial.index.extract_llm_graph import extract_llm_graph
from ragtrial.llm.ledger import read_ledger
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


def run(scripted, folder: Path, concurrency: int, graph_source: str = "llm"):
    llm = {"fold_system": False, "concurrency": concurrency, "backoff_initial_s": 0.01, "backoff_max_s": 0.05}
    index = {
        "graph_source": graph_source,
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


class Timeline:
    """A reply function that holds each request (longer for the `slow` ones) and keeps, per request,
    what `label_of(body)` names it and when it came and went.
    """

    def __init__(self, reply, label_of, slow, hold_s: float = 0.05, slow_s: float = 1.0):
        self.reply, self.label_of, self.slow, self.hold_s, self.slow_s = reply, label_of, slow, hold_s, slow_s
        self.seen: list[tuple[str, float, float]] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> str:
        label, came = self.label_of(body), time.monotonic()
        time.sleep(self.slow_s if self.slow(label) else self.hold_s)
        with self.lock:
            self.seen.append((label, came, time.monotonic()))
        return self.reply(body)

    def span(self, label: str) -> tuple[float, float]:
        return next((came, went) for seen, came, went in self.seen if seen == label)


def reports_at_1_and_4(scripted, tmp_path, descriptions: dict[str, str], budget: int, slow):
    """Two trees of communities (P over X and Y, R over S and T) reported at concurrency 1 and 4 with
    the `slow` titles held longer: the run at 4's timeline and result (its tables checked equal to 1's).
    """
    ents, rels, cls = tables(
        descriptions, [("A", "B"), ("B", "C"), ("C", "D"), ("G", "H"), ("H", "I"), ("I", "J")]
    )
    comms = frame(
        community("P", 0, None, list("ABCD"), rels),
        community("X", 1, "P", list("AB"), rels),
        community("Y", 1, "P", list("CD"), rels),
        community("R", 0, None, list("GHIJ"), rels),
        community("S", 1, "R", list("GH"), rels),
        community("T", 1, "R", list("IJ"), rels),
    )
    settings = IndexSettings(report_levels=None, max_reports=None, report_context_tokens=budget)

    def label(body: dict) -> str:  # the title its reply gives: the first entity or sub-report of its context
        return json.loads(report_reply(body))["title"]

    results = []
    for concurrency in (1, 4):
        timeline = Timeline(report_reply, label, slow=slow)
        scripted.default_reply = timeline
        llm = make_llm(scripted.base_url, tmp_path / str(concurrency), concurrency=concurrency)
        results.append(create_community_reports(llm, ents, rels, cls, comms, settings))
    one, four = results
    pd.testing.assert_frame_equal(one.reports, four.reports)
    assert one.stats == four.stats
    return timeline, four


def test_a_parent_report_is_asked_for_once_its_own_children_are_reported(scripted, tmp_path) -> None:
    # P's children X and Y are quick, R's child S is slow: P's request is sent while S's is still
    # waited for, so P does not wait for the whole level below it.
    long = {e: "a long description " * 12 for e in "ABCDGHIJ"}
    timeline, _ = reports_at_1_and_4(scripted, tmp_path, long, 60, slow=lambda title: title == "About G")
    # P's context holds its children's reports ("Above About A"), S's is the slow "About G"
    parent_sent, _ = timeline.span("Above About A")
    _, slow_child_done = timeline.span("About G")
    assert parent_sent < slow_child_done


def test_a_parent_whose_elements_fit_waits_for_no_child_and_one_that_overflows_for_all(scripted, tmp_path):
    # P's own elements fit the window: it reads no sub-report, so it goes out while its slow child X
    # is still answering. R's overflow it: it is sent only once both its children are reported.
    short_and_long = {**{e: e.lower() for e in "ABCD"}, **{e: "a long description " * 12 for e in "GHIJ"}}
    timeline, four = reports_at_1_and_4(
        scripted, tmp_path, short_and_long, 100, slow=lambda title: title in ("About A", "About G")
    )
    contexts = {c["community_id"]: c["context"] for c in four.stats["contexts"]}
    assert contexts["P"] == "elements" and contexts["R"] == "sub-reports"
    # P's title is its first element's (B, of its most prominent edge), X's the slow "About A"
    assert timeline.span("About B")[0] < timeline.span("About A")[1]
    r_sent = next(came for title, came, _ in timeline.seen if title.startswith("Above"))
    assert r_sent >= max(timeline.span("About G")[1], timeline.span("About I")[1])


def test_a_chunks_gleaning_is_sent_before_the_other_chunks_extractions_are_back(scripted, tmp_path) -> None:
    # chunk c2's extraction is slow: c0's gleaning round goes out while it is still waited for
    texts = ["Ada Lind met Bo Carr.", "Cy Dunn met Di Eyre.", "Ed Fox met Flo Gray."]
    chunks = pd.DataFrame({"chunk_id": ["c0", "c1", "c2"], "text": texts})
    settings = IndexSettings(max_gleanings=1)

    def label(body: dict) -> str:
        return f"{stage_of(body)} {next(t for t in texts if t in user_turns(body)[0])}"

    timeline = Timeline(model, label, slow=lambda seen: seen == f"extract_graph {texts[2]}")
    scripted.default_reply = timeline
    extract_llm_graph(make_llm(scripted.base_url, tmp_path, concurrency=4), chunks, settings)
    glean_sent, _ = timeline.span(f"glean_graph {texts[0]}")
    _, slow_extraction_done = timeline.span(f"extract_graph {texts[2]}")
    assert glean_sent < slow_extraction_done


def arrivals(scripted, index) -> list[str]:
    """What the server was asked, in arrival order: a chat request's stage, or which table an
    embedding request embeds.
    """
    chunks = set(index.chunks["text"])
    entities = {
        f"{n}: {d}" for n, d in zip(index.entities["name"], index.entities["description"], strict=True)
    }
    seen = []
    for request in scripted.requests:
        if not request["path"].endswith("/embeddings"):
            seen.append(stage_of(request["body"]))
            continue
        first = request["body"]["input"][0]
        seen.append(
            "embed chunks" if first in chunks else "embed entities" if first in entities else "embed reports"
        )
    return seen


def test_work_of_later_stages_runs_beside_the_model_calls_and_is_counted_in_its_own_stage(scripted, tmp_path):
    scripted.default_reply = InFlight(model, hold_s=0.05, kind_of=stage_of)
    builds = {}
    for concurrency in (1, 8):
        scripted.requests.clear()
        index, manifest, _ = run(scripted, tmp_path / str(concurrency), concurrency, graph_source="both")
        seen = arrivals(scripted, index)
        last = {kind: max(i for i, k in enumerate(seen) if k == kind) for kind in set(seen)}
        first = {kind: min(i for i, k in enumerate(seen) if k == kind) for kind in set(seen)}
        stages = {row["stage"]: row["calls"] for row in manifest["stages"]}
        # every embedding call counted once, in the embedding stage, where its vectors are used
        assert stages["embeddings"] == sum(k.startswith("embed") for k in seen) >= 3
        assert sum(stages.values()) == len(read_ledger(tmp_path / str(concurrency) / "run" / "ledger.csv"))
        builds[concurrency] = index, seen, first, last, manifest
    index_one, seen, first, last, manifest = builds[1]
    # one request at a time: the old order, every embedding after the last model call
    assert min(i for i, k in enumerate(seen) if k.startswith("embed")) > last["community_report"]
    assert "ran_ahead_s" not in manifest
    index_eight, seen, first, last, manifest = builds[8]
    # the chunks are embedded while the extraction's calls are in flight, the entities while the reports' are
    assert first["embed chunks"] < last["extract_graph"]
    assert first["embed entities"] < last["community_report"]
    assert set(manifest["ran_ahead_s"]) == {
        "chunk_dates",
        "chunks_embeddings",
        "entities_embeddings",
    }
    assert_same_tables(index_one, index_eight)
