"""Benchmark: one index build of the generated `--size` corpus on one machine and on a 2-node Ray
cluster on loopback (`tests/ray_cluster.py`, one CPU a node, started before the clock): wall time per
stage and in all, and the ratio of the two, measured in one run.

The build holds both graphs (`graph_source: both`: the NLP graph, and the LLM graph of `--llm-chunks`
chunks), the community reports and the embeddings, against the latency-simulating endpoint of the
throughput benchmark (`tests/latency_server.py`, a process of its own, `--latency` per request;
embeddings without latency) at `llm.concurrency` `--concurrency` (the cluster's extraction tasks
share it, so the endpoint sees the same requests in flight). Each build starts from a cold cache of
its own; the tables of the two builds must be equal (exit status 1 if not). The nodes share this
machine's cores, so the figures are ratios within one run, not a cluster's throughput.

    PYTHONPATH=lib .venv/bin/python bench/ray_index.py [--size medium] [--latency 0.3] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # test-side code, as tests use it

from latency_server import MODEL, LatencyServerProcess  # noqa: E402
from ray_cluster import LocalRayCluster  # noqa: E402

from ragtrial.data.experiment_dataset import load_experiment_dataset  # noqa: E402
from ragtrial.index.build import RAY_ADDRESS_ENV, build_index  # noqa: E402
from ragtrial.index.tables import EMBEDDINGS, SCHEMAS, GraphIndex  # noqa: E402
from ragtrial.runner.context import open_run  # noqa: E402


def build(folder: Path, base_url: str, args: argparse.Namespace) -> tuple[GraphIndex, float]:
    settings = {
        "llm": {
            "backend": "openai_compatible",
            "base_url": base_url,
            "model": MODEL,
            "concurrency": args.concurrency,
        },
        "embeddings": {"backend": "openai_compatible", "base_url": base_url, "model": "hashing-64"},
        "cache": {"url": f"sqlite:///{folder / 'cache.sqlite'}"},
        "data": {"size": args.size},
        "index": {
            "store_path": str(folder / "indexes"),
            "graph_source": "both",
            "reports": "llm",
            "llm_max_chunks": args.llm_chunks,
        },
    }
    ctx = open_run(settings, folder / "run", notebook="bench")
    dataset = load_experiment_dataset(ctx.settings.data)
    started = time.perf_counter()
    index = build_index(ctx, dataset)
    return index, time.perf_counter() - started


def same_tables(a: GraphIndex, b: GraphIndex) -> bool:
    try:
        for table in SCHEMAS:
            pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table))
        for attribute, _ in EMBEDDINGS.values():
            np.testing.assert_allclose(getattr(a, attribute), getattr(b, attribute), atol=1e-6)
    except AssertionError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="medium")
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--llm-chunks", type=int, default=24)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="ray-index-") as tmp,
        LatencyServerProcess(args.latency) as server,
    ):
        single, single_s = build(Path(tmp) / "single", server.base_url, args)
        with LocalRayCluster(nodes=2, cpus_per_node=1) as cluster:
            os.environ[RAY_ADDRESS_ENV] = cluster.address
            try:
                on_ray, ray_s = build(Path(tmp) / "ray", server.base_url, args)
            finally:
                del os.environ[RAY_ADDRESS_ENV]
    equal = same_tables(single, on_ray)
    print(
        f"{args.size} corpus: {len(single.chunks)} chunks, LLM graph of {args.llm_chunks}, "
        f"latency {args.latency} s, llm.concurrency {args.concurrency}"
    )
    print(f"{'stage':<20} {'one machine s':>14} {'2 Ray nodes s':>14} {'ratio':>7}")
    theirs = {s["stage"]: s["wall_s"] for s in on_ray.manifest["stages"]}
    for stage in single.manifest["stages"]:
        name, ours = stage["stage"], stage["wall_s"]
        print(f"{name:<20} {ours:>14.2f} {theirs[name]:>14.2f} {theirs[name] / max(ours, 1e-9):>7.2f}")
    print(f"{'build':<20} {single_s:>14.2f} {ray_s:>14.2f} {ray_s / single_s:>7.2f}")
    tasks = {stage: record["tasks"] for stage, record in on_ray.manifest["distributed"]["stages"].items()}
    print(f"tasks on the cluster: {tasks}; tables equal: {equal}")
    sys.exit(0 if equal else 1)


if __name__ == "__main__":
    main()
