"""Benchmark: a simulated study on 1 and 2 Ray nodes: wall time and model calls per second.

The study is a grid of `--runs` notebook runs, 01_build_index of the generated `--size` corpus with
one data seed each (so each run is an identity of its own, and the Ray engine may run them at once),
the LLM graph on every chunk with one gleaning round, against the latency-simulating endpoint of the
throughput benchmark (`tests/latency_server.py`, a process of its own, `--latency` per request;
embeddings without latency) at `llm.concurrency` 1: each run waits on its endpoint call after call,
as a long study's runs do. Each leg is the whole study with `ragtrial run` in a fresh outputs folder
(a cold cache): the threaded runner at --workers 1 (the reference) and 2, then `--engine ray` on a
1-node and a 2-node cluster on loopback (`tests/ray_cluster.py`: one CPU a node, each run holding
one), the cluster started before the clock. Per leg: wall time, live model calls (the ledgers),
calls per second, speed-up over the 1-node leg, and whether every run's tables and ledger equal the
reference's (exit status 1 if not). The nodes share this machine's cores, so the figures are ratios
measured within one run, not a cluster's throughput. Then the dry run of the paper-scale study
(`ragtrial estimate params/paper_scale_study.yaml`, a 1.3M-token corpus, M=25 trials).

    .venv/bin/python bench/ray_batch.py [--runs 4] [--latency 1.0] [--size tiny] [--skip-estimate]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # test-side code, as tests use it

from latency_server import MODEL, LatencyServerProcess  # noqa: E402
from ray_cluster import LocalRayCluster  # noqa: E402
from run_outputs import fingerprint  # noqa: E402

from ragtrial.llm.ledger import read_ledger  # noqa: E402

ESTIMATE = [
    "params/paper_scale_study.yaml",
    "--set",
    "llm.base_url=https://api.openai.com/v1",
    "--set",
    "llm.model=gpt-4o-mini",
    "--set",
    "llm.estimate_latency_s=1",
    "--set",
    "llm.price_prompt_per_mtok=0.15",
    "--set",
    "llm.price_completion_per_mtok=0.60",
]


@dataclass
class Leg:
    name: str
    wall_s: float
    live_calls: int
    tables: str


def study(folder: Path, base_url: str, runs: int, size: str) -> Path:
    """The batch file of the study, its cache and indexes under the outputs folder."""
    settings = {
        "llm": {"backend": "openai_compatible", "base_url": base_url, "model": MODEL, "concurrency": 1},
        "embeddings": {"backend": "openai_compatible", "base_url": base_url, "model": "hashing-64"},
        "data": {"size": size},
        "index": {"llm_max_chunks": None, "max_gleanings": 1},
    }
    grid = {"data.seed": list(range(1, runs + 1))}
    path = folder / "study.yaml"
    path.write_text(
        yaml.safe_dump({"settings": settings, "runs": [{"notebook": "01_build_index", "grid": grid}]})
    )
    return path


def live_calls(outputs: Path) -> int:
    total = 0
    for ledger in outputs.glob("*/ledger.csv"):
        rows = read_ledger(ledger)
        total += int((~rows["cached"].astype(bool) & (rows["kind"] != "embedding")).sum())
    return total


def leg(name: str, batch: Path, outputs: Path, *options: str) -> Leg:
    command = [sys.executable, "-m", "ragtrial", "run", str(batch), "--outputs", str(outputs), *options]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{name}: ragtrial run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    statuses = {json.loads(p.read_text())["status"] for p in outputs.glob("*/run.json")}
    if statuses != {"completed"}:
        raise SystemExit(f"{name}: runs ended {statuses}")
    return Leg(name, wall, live_calls(outputs), fingerprint(outputs))


def print_table(legs: list[Leg], runs: int, latency_s: float, size: str) -> bool:
    reference, one_node = legs[0], next(leg for leg in legs if leg.name == "ray, 1 node")
    print(
        f"\n**A study of {runs} index builds** ({size} corpus, one data seed each, LLM graph on every chunk, "
        f"llm.concurrency 1, {latency_s * 1000:.0f} ms per request, cold cache per leg)\n"
    )
    print("| engine | live calls | wall s | calls / s | speed-up over 1 node | tables vs threads |")
    print("|---|---:|---:|---:|---:|---|")
    for item in legs:
        same = "identical" if item.tables == reference.tables else "DIFFER"
        print(
            f"| {item.name} | {item.live_calls} | {item.wall_s:.1f} | {item.live_calls / item.wall_s:.2f} "
            f"| {one_node.wall_s / item.wall_s:.2f} | {same} |"
        )
    return all(item.tables == reference.tables and item.live_calls == reference.live_calls for item in legs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4, help="runs in the study (one data seed each)")
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per request")
    parser.add_argument("--size", default="tiny", help="data.size of the generated corpus")
    parser.add_argument("--skip-estimate", action="store_true", help="leave out the paper-scale dry run")
    args = parser.parse_args()
    legs: list[Leg] = []
    with (
        tempfile.TemporaryDirectory(prefix="ragtrial-bench-") as name,
        LatencyServerProcess(args.latency) as server,
    ):
        tmp = Path(name)
        batch = study(tmp, server.base_url, args.runs, args.size)
        for workers in (1, 2):
            legs.append(
                leg(
                    f"threads, --workers {workers}",
                    batch,
                    tmp / f"threads-{workers}",
                    "--workers",
                    str(workers),
                )
            )
        for nodes in (1, 2):
            started = time.perf_counter()
            with LocalRayCluster(nodes=nodes, cpus_per_node=1) as cluster:
                up = time.perf_counter() - started
                ray_options = ("--engine", "ray", "--address", cluster.address)
                legs.append(
                    leg(
                        f"ray, {nodes} node" + ("s" if nodes > 1 else ""),
                        batch,
                        tmp / f"ray-{nodes}",
                        *ray_options,
                    )
                )
            print(f"{nodes}-node cluster started in {up:.0f} s (not in the wall time)")
    ok = print_table(legs, args.runs, args.latency, args.size)
    if not args.skip_estimate:
        print("\n**Dry run of the paper-scale study** (`ragtrial estimate " + " ".join(ESTIMATE) + "`)\n")
        done = subprocess.run(
            [sys.executable, "-m", "ragtrial", "estimate", *ESTIMATE],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        totals = done.stdout[done.stdout.index("== totals") :] if "== totals" in done.stdout else done.stdout
        print("```\n" + totals.rstrip() + "\n```")
        ok &= done.returncode == 0
    if not ok:
        print("\nThe legs' results differ (or the dry run failed).")
        sys.exit(1)


if __name__ == "__main__":
    main()
