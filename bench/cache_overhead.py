"""Cache overhead: time per cache hit, and the kit's share of wall time in a cold backend check.

Run: .venv/bin/python bench/cache_overhead.py
Both figures are ratios or per-call times measured within this one run (the machine is shared).
1. A cache hit through the full LLM layer (key hashing, SQLite lookup, ledger row) vs a live call
   to the embedded model on the same prompt.
2. The backend-check probes run cold (empty cache) against the embedded server: wall time split
   into model time (latency of live calls as the ledger records it) and everything else.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from ragtrial.llm.backend_check import run_backend_check  # noqa: E402
from ragtrial.llm.server import stop_all  # noqa: E402
from ragtrial.runner.context import open_run  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = {"cache": {"url": f"sqlite:///{Path(tmp) / 'cache.sqlite'}"}}
        ctx = open_run(settings, Path(tmp) / "run", notebook="bench_cache_overhead")
        ctx.embedder.embed(["warm up the embedding model"], stage="warmup")
        ctx.llm.complete("Warm up.", stage="warmup", max_tokens=1)  # starts the server

        started = time.perf_counter()
        run_backend_check(ctx)
        cold_wall = time.perf_counter() - started
        ledger = ctx.ledger_frame()
        cold = ledger[ledger["stage"] == "backend_check"]
        model_s = float(
            cold.loc[~cold["cached"].astype(bool) & (cold["kind"] != "embedding"), "latency_s"].sum()
        )
        embed_s = float(cold.loc[cold["kind"] == "embedding", "latency_s"].sum())

        live = ctx.llm.complete("The capital of Italy is", stage="bench", max_tokens=8)
        hits = []
        for _ in range(500):
            t0 = time.perf_counter()
            ctx.llm.complete("The capital of Italy is", stage="bench", max_tokens=8)
            hits.append(time.perf_counter() - t0)
        stop_all()

    hit_ms = statistics.median(hits) * 1000
    kit_s = cold_wall - model_s - embed_s
    print("| measure | value |\n|---|---|")
    print(f"| cache hit through the LLM layer (median of 500) | {hit_ms:.2f} ms |")
    print(f"| live call, same prompt, 8 tokens | {live.latency_s * 1000:.0f} ms |")
    print(f"| hit / live | 1 : {live.latency_s * 1000 / hit_ms:.0f} |")
    print(f"| cold backend check wall time | {cold_wall:.2f} s |")
    print(f"| of which model server (live LLM calls) | {model_s:.2f} s ({model_s / cold_wall:.1%}) |")
    print(f"| of which local embedding model | {embed_s:.2f} s ({embed_s / cold_wall:.1%}) |")
    print(f"| of which kit (everything else) | {kit_s:.3f} s ({kit_s / cold_wall:.1%}) |")


if __name__ == "__main__":
    main()
