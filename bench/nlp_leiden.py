"""Benchmark: NLP graph extraction and hierarchical Leiden on the GraphRAG paper's podcast corpus.

The corpus arrives pre-chunked (1,669 files, one file = one chunk, as fed to GraphRAG), so each file
is a document and becomes exactly one chunk. Prints wall time per stage and the resulting counts as
a markdown table.

    .venv/bin/python bench/nlp_leiden.py [--folder PATH] [--cooccurrence chunk|sentence]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from ragtrial.index.chunk_documents import documents_as_chunks
from ragtrial.index.create_communities import create_communities
from ragtrial.index.extract_nlp_graph import extract_nlp_graph
from ragtrial.index.phrases import sentences
from ragtrial.records import Document, records_frame

DEFAULT_FOLDER = (
    Path(__file__).resolve().parents[1].parent
    / "shared"
    / "datasets"
    / "graphrag_paper_podcast_msft"
    / "kevin_scott_podcast"
    / "input"
)


def timed(stage: str, times: dict[str, float], fn: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    result = fn()
    times[stage] = time.perf_counter() - start
    return result


def load_podcast(folder: Path) -> pd.DataFrame:
    files = sorted(folder.glob("*.txt"))
    if not files:
        raise SystemExit(f"no .txt files in {folder}")
    docs = [
        Document(doc_id=f.name, title=f.stem, text=f.read_text(encoding="utf-8"), source=str(folder))
        for f in files
    ]
    return records_frame(docs, Document)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=DEFAULT_FOLDER)
    parser.add_argument("--cooccurrence", choices=["chunk", "sentence"], default="chunk")
    parser.add_argument("--max-cluster-size", type=int, default=10)
    args = parser.parse_args()

    times: dict[str, float] = {}
    documents = timed("load files", times, lambda: load_podcast(args.folder))
    chunks = timed("chunks: one per file, tokens counted", times, lambda: documents_as_chunks(documents))
    # One-time cost, reported apart so the extraction time is per corpus: NLTK import + punkt tables.
    timed("load sentence splitter (once per process)", times, lambda: sentences("Warm up."))
    entities, relations = timed(
        f"NLP extraction ({args.cooccurrence} co-occurrence)",
        times,
        lambda: extract_nlp_graph(chunks, cooccurrence=args.cooccurrence),
    )
    communities = timed(
        f"hierarchical Leiden (max_cluster_size={args.max_cluster_size})",
        times,
        lambda: create_communities(entities, relations, max_cluster_size=args.max_cluster_size),
    )

    per_level = communities.groupby("level").size()
    counts = {
        "chunks": f"{len(chunks):,}",
        "tokens": f"{chunks['n_tokens'].sum():,}",
        "entities": f"{len(entities):,}",
        "relations": f"{len(relations):,}",
        "isolated entities": f"{(entities['degree'] == 0).sum():,}",
        "community levels": str(len(per_level)),
        "communities per level": ", ".join(f"C{level}: {n:,}" for level, n in per_level.items()),
    }
    print("| stage | wall time (s) |\n|---|---:|")
    for stage, seconds in times.items():
        print(f"| {stage} | {seconds:.2f} |")
    print("\n| count | value |\n|---|---:|")
    for name, value in counts.items():
        print(f"| {name} | {value} |")
    top = entities.nlargest(10, "degree")[["name", "degree"]]
    print(
        "\nTop entities by degree: "
        + ", ".join(f"{n} ({d})" for n, d in zip(top["name"], top["degree"], strict=True))
    )


if __name__ == "__main__":
    main()
