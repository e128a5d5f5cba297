"""Benchmark: where an index build's wall time goes — waiting for the model, or the kit's own work.

Builds the default index (generated corpus, embedded model unless `--set llm...` says otherwise)
with a cold response cache in a temporary folder, then splits the wall time of every build stage
into model time (latency of the live calls in the ledger: LLM and embeddings) and kit time
(everything else: chunking, NLP extraction, merging, Leiden, context building, persistence).
Starting the llama.cpp server and loading the embedding model happen before the clock runs (one
warm-up call each), and are printed separately. Prints markdown tables; the target is a kit share
below 5% of the wall time.

    .venv/bin/python bench/index_build.py [--set index.llm_max_chunks=4 ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ragtrial.config.batch import deep_merge, parse_set_overrides
from ragtrial.data.experiment_dataset import load_experiment_dataset
from ragtrial.index.build import build_index
from ragtrial.runner.context import open_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="settings override")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ragtrial-bench-") as tmp:
        settings = deep_merge(
            {"cache": {"url": f"sqlite:///{tmp}/cache.sqlite"}, "index": {"store_path": f"{tmp}/indexes"}},
            parse_set_overrides(args.set),
        )
        ctx = open_run(settings, Path(tmp) / "run", notebook="bench_index_build")
        dataset = load_experiment_dataset(ctx.settings.data)
        started = time.perf_counter()
        ctx.llm.complete("Hello", stage="bench_warmup", max_tokens=1)  # starts the embedded server
        ctx.embedder.embed(["warm up"], stage="bench_warmup")  # loads the embedding model
        warmup = time.perf_counter() - started
        started = time.perf_counter()
        index = build_index(ctx, dataset)
        wall = time.perf_counter() - started

    stages = index.manifest["stages"]
    staged = sum(row["wall_s"] for row in stages)
    rows = [*stages, {"stage": "save and reload", "wall_s": wall - staged, "model_s": 0.0, "live_calls": 0}]
    model = sum(row["model_s"] for row in rows)
    print(
        f"Corpus: {dataset.name} ({len(index.documents)} documents, {len(index.chunks)} chunks); "
        f"LLM {ctx.settings.llm.model}; graph source {ctx.settings.index.graph_source}; cold cache. "
        f"Warm-up outside the clock (server start, embedding model load): {warmup:.1f} s.\n"
    )
    print("| stage | wall (s) | model (s) | kit (s) | live calls |\n|---|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['stage']} | {row['wall_s']:.2f} | {row['model_s']:.2f} "
            f"| {row['wall_s'] - row['model_s']:.2f} | {row['live_calls']} |"
        )
    print(
        f"| **total** | **{wall:.2f}** | **{model:.2f}** | **{wall - model:.2f}** | "
        f"**{sum(row['live_calls'] for row in rows)}** |"
    )
    print(f"\nKit share of wall time: **{(wall - model) / wall:.1%}** (target < 5%).")


if __name__ == "__main__":
    main()
