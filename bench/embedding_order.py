"""Embedding throughput: texts computed in input order vs longest first (what `Embedder.embed` does),
through the same local MiniLM and the same batch size, on real passages of unequal length.

Run: .venv/bin/python bench/embedding_order.py
The figure is a ratio of two timings within this one run (the machine is shared). Each order embeds
the same 640 2Wiki passages (title and text, as the retrieval benchmark indexes them) batch by batch;
a batch is padded to its longest text, so batches of similar lengths do less work.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragtrial.config.data import data_path  # noqa: E402
from ragtrial.config.llm import EmbeddingSettings  # noqa: E402
from ragtrial.llm.embedder import resolve_local_embedding_model  # noqa: E402

PASSAGES = Path("2wikimultihopqa_hipporag/2wikimultihopqa_corpus.json")


def throughput(model, texts: list[str], batch_size: int) -> float:
    started = time.perf_counter()
    for start in range(0, len(texts), batch_size):
        model.encode(texts[start : start + batch_size], batch_size=batch_size, normalize_embeddings=True)
    return len(texts) / (time.perf_counter() - started)


def main() -> None:
    from sentence_transformers import SentenceTransformer

    settings = EmbeddingSettings()
    model = SentenceTransformer(resolve_local_embedding_model(settings.model), device="cpu")
    records = json.loads(data_path(str(PASSAGES)).read_text(encoding="utf-8"))[:640]
    texts = [f"{r['title']}\n{r['text']}" for r in records]
    model.encode(texts[:8])  # warm up
    as_given = throughput(model, texts, settings.batch_size)
    longest_first = throughput(model, sorted(texts, key=len, reverse=True), settings.batch_size)
    print(f"input order: {as_given:.1f} texts/s; longest first: {longest_first:.1f} texts/s")
    print(f"longest first / input order: {longest_first / as_given:.2f}")


if __name__ == "__main__":
    main()
