"""Benchmark: query latency of every LLM-free retriever on an index of more than 10,000 chunks.

The generated corpus at the `large` preset is cut into 128-token chunks, the NLP graph is extracted
and clustered with hierarchical Leiden (no model anywhere), and chunks / entities are embedded with
the deterministic `HashingEmbedder` (all-MiniLM-L6-v2 on this 2-core machine embeds ~15 chunks/s,
i.e. >10 minutes for the corpus, and ~0.2 s per question). Community reports need an LLM, so
local search runs without them. Prints a markdown table: build time, p50 / p95 query latency over
the sampled questions (after a warm-up) as wall time and as this process's CPU time (the
machine is shared: CPU time is what a query costs, wall time what it took), fallbacks, and
gold-document recall@k. `--index-dir` keeps the built index for the next run.

    .venv/bin/python bench/retrieval_latency.py [--questions 200] [--k 5] [--index-dir /tmp/large-index]
"""

from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path

import numpy as np

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.data.synthetic import generate_corpus
from ragtrial.index.chunk_documents import chunk_documents
from ragtrial.index.create_communities import create_communities
from ragtrial.index.embed_index import embed_index
from ragtrial.index.extract_nlp_graph import extract_nlp_graph
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.hashing_embedder import HashingEmbedder
from ragtrial.records import Dataset
from ragtrial.retrieval.base import RetrieverParts
from ragtrial.retrieval.registry import RETRIEVERS, make_retriever

# With the default retrieval settings (string/embedding linking) no retriever calls a model.
LLM_FREE = [name for name in RETRIEVERS if name != "vector_llamaindex"]


def build_index(
    dataset: Dataset, chunk_size: int, embedder: HashingEmbedder
) -> tuple[GraphIndex, dict[str, float]]:
    times: dict[str, float] = {}
    start = time.perf_counter()
    documents = dataset.documents_frame()
    chunks = chunk_documents(documents, chunk_size=chunk_size, overlap=0)
    times["corpus + chunking"] = time.perf_counter() - start
    start = time.perf_counter()
    entities, relations = extract_nlp_graph(chunks)
    times["NLP graph"] = time.perf_counter() - start
    start = time.perf_counter()
    communities = create_communities(entities, relations)
    times["Leiden"] = time.perf_counter() - start
    start = time.perf_counter()
    index = embed_index(
        GraphIndex(
            documents=documents,
            chunks=chunks,
            entities=entities,
            relations=relations,
            communities=communities,
        ),
        embedder.embed,
    )
    times["embeddings"] = time.perf_counter() - start
    return index, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--chunk-size", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--retrievers", nargs="*", default=LLM_FREE, choices=list(RETRIEVERS))
    parser.add_argument("--index-dir", type=Path, help="load the index from here if saved, else save it here")
    args = parser.parse_args()

    embedder = HashingEmbedder()
    dataset, _ = generate_corpus("large", seed=0)
    if args.index_dir and (args.index_dir / "manifest.json").is_file():
        index, times = GraphIndex.load(args.index_dir), {"loaded from": 0.0}
    else:
        index, times = build_index(dataset, args.chunk_size, embedder)
        if args.index_dir:
            index.save(args.index_dir)
    sample = random.Random(0).sample(dataset.questions, min(args.questions, len(dataset.questions)))
    doc_of = dict(zip(index.chunks["chunk_id"], index.chunks["doc_id"], strict=True))
    print(
        f"index: {len(index.chunks):,} chunks (mean {index.chunks['n_tokens'].mean():.0f} tokens), "
        f"{len(index.entities):,} entities, {len(index.relations):,} relations, "
        f"{index.communities['level'].nunique()} Leiden levels; embeddings: {embedder.model_name} "
        f"({index.chunk_embeddings.shape[1]} dims, deterministic feature hashing, not MiniLM)"
    )
    print("index build: " + ", ".join(f"{stage} {s:.1f} s" for stage, s in times.items()))
    print(
        f"{len(sample)} questions (+{args.warmup} warm-up), k={args.k}, load average at start "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n"
    )
    print(
        "| retriever | build (s) | p50 (ms) | p95 (ms) | CPU p50 (ms) | CPU p95 (ms) | fallbacks "
        "| gold-doc recall@k |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    parts = RetrieverParts(embedder)
    for name in args.retrievers:
        start = time.perf_counter()
        retriever = make_retriever(name, index, parts, RetrievalSettings(k=args.k))
        build = time.perf_counter() - start
        for question in sample[: args.warmup]:
            retriever.retrieve(question.question, args.k)
        latencies, cpu, fallbacks, recalls = [], [], 0, []
        for question in sample:
            start, start_cpu = time.perf_counter(), time.process_time()
            found = retriever.retrieve(question.question, args.k)
            latencies.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            fallbacks += bool(found.fallback)
            if question.gold_doc_ids:  # chunks shown or (triplets) cited, first k
                docs = {doc_of[c] for c in found.chunk_ids[: args.k]}
                recalls.append(len(docs & set(question.gold_doc_ids)) / len(question.gold_doc_ids))
        p50, p95 = np.percentile(np.array(latencies) * 1000, [50, 95])
        cpu50, cpu95 = np.percentile(np.array(cpu) * 1000, [50, 95])
        print(
            f"| {name} | {build:.1f} | {p50:.1f} | {p95:.1f} | {cpu50:.1f} | {cpu95:.1f} | {fallbacks} | "
            f"{np.mean(recalls):.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
