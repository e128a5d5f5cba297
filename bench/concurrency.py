"""Benchmark: wall time of LLM-bound work at `llm.concurrency` 1, 8, 32 and 128 against the ideal.

A latency-simulating OpenAI-compatible server (`tests/latency_server.py`) on 127.0.0.1 answers every
request after a fixed latency (default 300 ms), up to 256 at once, with replies that depend only on
the request, so the results must be the same at every concurrency. Embeddings come from the same
server without latency (feature hashing): the figure is about model calls. Two workloads, each at
every concurrency with a cold cache of its own:
  index  the index build of a generated corpus (`--size`, default medium: 507 calls; notebook 01's
         `build_index`) with the LLM graph on every chunk (`index.llm_max_chunks: null`), a summary
         of every element extracted with differing descriptions and a report for every community
         of every level
  judge  notebook 07's calls (answers, classic judge, length alignment, unbiased judge) for three
         methods (three pairs) over `--trials` trials, on an index built beforehand
The index build has dependent rounds (a chunk's gleaning after its extraction, summaries after
extraction, a community's report after its own children's reports) and LLM-free stages (NLP graph,
Leiden, embeddings), so its wall time stays above the ideal by a few latencies per round whatever
the concurrency; the judge run is wide (thousands of independent judge calls) after a few such
rounds.
With `--p99` the latencies are log-normal instead (`tests/capable_server.py`: median `--latency`, that
99th percentile, longer for long prompts and replies, drawn from the request), so stage barriers pay
for their slowest call; `--trial-scope answers` runs the judge workload as the paper batches do
(every trial writes, aligns and judges answers of its own).
For each: wall time, live calls (the ledger), ideal = Σ latency / concurrency, the ratio
wall / ideal (target <= 1.2 at 32), the most requests the server saw in flight, the kit's CPU per
live call (this process, every thread, over the workload: the calls and all else it computes; target
<= 3 ms at 128), and whether the result tables are identical to those at concurrency 1 (exit
status 1 if not), with the first 12 hex digits of their sha256 to compare across runs. Then the response
cache's cost under threads: per-write time of `put_completion` (every write checkpoints the WAL)
from 1 thread vs 32 threads, and a replay of the judge workload from a warm cache at 32 vs 1.
All figures are ratios or times measured within this one run (the machine is shared). The server
runs in a process of its own, as a real endpoint does.

    .venv/bin/python bench/concurrency.py [--latency 0.3] [--p99 2] [--concurrency 1 8 32 128] [--trials 12]
        [--questions-per-type 6] [--size medium] [--workload index judge cache] [--trial-scope answers]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # test-side code, as tests use it

from capable_server import CapableServerProcess  # noqa: E402
from latency_server import LatencyServerProcess  # noqa: E402

from ragtrial.config.batch import deep_merge  # noqa: E402
from ragtrial.data.experiment_dataset import load_experiment_dataset  # noqa: E402
from ragtrial.evaluation.judge.answers import answer_in_trials  # noqa: E402
from ragtrial.evaluation.judge.pipeline import comparison_design, run_judge_pipeline  # noqa: E402
from ragtrial.index.build import build_index, load_or_build_index  # noqa: E402
from ragtrial.index.tables import SCHEMAS  # noqa: E402
from ragtrial.llm.cache import ResponseCache  # noqa: E402
from ragtrial.methods.registry import make_methods  # noqa: E402
from ragtrial.questions.sampling import judge_questions, questions_frame  # noqa: E402
from ragtrial.runner.context import RunContext, open_run  # noqa: E402

JUDGE_METHODS = ["naive_rag", "local_search", "global_search"]
# Columns that time a call, not what it returned.
TIMING_COLUMNS = ("latency_s", "wall_s")


@dataclass
class Leg:
    """One workload at one concurrency."""

    concurrency: int
    wall_s: float
    live_calls: int
    max_in_flight: int
    tables: str  # fingerprint of the result tables
    cpu_s: float  # CPU seconds of this process (every thread) during the workload
    latency_s: float  # Σ latency the endpoint spent on the live calls

    @property
    def ideal_s(self) -> float:
        return self.latency_s / self.concurrency


def fingerprint(tables: dict[str, Any]) -> str:
    """sha256 over the tables' contents (timing columns dropped), in name order."""
    digest = hashlib.sha256()
    for name in sorted(tables):
        value = tables[name]
        if isinstance(value, pd.DataFrame):
            value = value.drop(columns=[c for c in value.columns if c in TIMING_COLUMNS])
            value = value.to_json(orient="split", default_handler=str)
        digest.update(name.encode() + b"\0" + str(value).encode())
    return digest.hexdigest()


def run_settings(
    server: LatencyServerProcess, tmp: Path, concurrency: int, overrides: dict[str, Any]
) -> dict:
    base = {
        "cache": {"url": f"sqlite:///{tmp / 'cache.sqlite'}"},
        "llm": {
            "backend": "openai_compatible",
            "base_url": server.base_url,
            "model": "latency-sim",
            "concurrency": concurrency,
        },
        "embeddings": {"backend": "openai_compatible", "base_url": server.base_url, "model": "hashing-64"},
    }
    return deep_merge(base, overrides)


def live_calls(ctx: RunContext) -> int:
    ledger = ctx.ledger_frame()
    return int((~ledger["cached"].astype(bool) & (ledger["kind"] != "embedding")).sum())


def measure(
    server: LatencyServerProcess,
    folder: Path,
    concurrency: int,
    overrides: dict[str, Any],
    workload: Callable[[RunContext], dict[str, Any]],
) -> Leg:
    ctx = open_run(run_settings(server, folder, concurrency, overrides), folder / "run", notebook="bench")
    server.reset_counts()
    started, cpu = time.perf_counter(), time.process_time()
    tables = workload(ctx)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    live, stats = live_calls(ctx), server.stats()
    # the log-normal endpoint sums its latencies; the fixed one spends the same on each call
    latency = stats["latency_s"] if "latency_s" in stats else live * server.latency_s
    return Leg(concurrency, wall, live, int(stats["max_in_flight"]), fingerprint(tables), cpu, latency)


def index_workload(ctx: RunContext) -> dict[str, Any]:
    """Notebook 01's build, cold: every table of the index and its embeddings."""
    index = build_index(ctx, load_experiment_dataset(ctx.settings.data))
    tables: dict[str, Any] = {name: getattr(index, name) for name in SCHEMAS}
    for name in ("chunk_embeddings", "entity_embeddings", "report_embeddings"):
        array = getattr(index, name)
        tables[name] = "" if array is None else hashlib.sha256(array.tobytes()).hexdigest()
    return tables


def build_judged_index(ctx: RunContext) -> dict[str, Any]:
    load_or_build_index(ctx, load_experiment_dataset(ctx.settings.data))
    return {}


def judge_workload(ctx: RunContext) -> dict[str, Any]:
    """Notebook 07's model calls and result tables, with the library calls its cells make."""
    cfg = ctx.settings.judge
    dataset = load_experiment_dataset(ctx.settings.data)
    index = load_or_build_index(ctx, dataset)
    questions, _ = judge_questions(ctx.llm, dataset, index, cfg, ctx.settings.questions)
    questions_df = questions_frame(questions)
    methods, _ = make_methods(cfg.methods, index, ctx, cfg)
    design = comparison_design(cfg, [m.name for m in methods])
    answered = answer_in_trials(methods, questions, index, ctx, cfg)
    run = run_judge_pipeline(ctx.llm, cfg, design, questions_df, answered)
    assert run.classic is not None  # notebook 07's design runs the classic orders
    return {
        "answers": run.answers.drop(columns=["failures"]),
        "classic_judgments": run.classic.judgments,
        "classic_summary": run.classic_summary,
        "alignment_log": run.alignment_log,
        "unbiased_judgments": run.unbiased.judgments,
        "judge_failures": run.judge_failures,
        **{
            f"unbiased_{name}": getattr(run.unbiased_result, name)
            for name in ("outcomes", "trials", "summary")
        },
    }


def print_table(title: str, legs: list[Leg], latency: str) -> bool:
    """The markdown table of one workload; whether every leg's tables equal those of the first."""
    print(f"\n**{title}** (latency {latency}, cold cache per row; ideal = Σ latency / concurrency)\n")
    print(
        "| concurrency | live calls | wall s | ideal s | wall / ideal | max in flight "
        "| kit CPU ms / live call | tables vs c=1 | tables' sha256 |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for leg in legs:
        ideal = leg.ideal_s
        same = "same" if leg.tables == legs[0].tables else "**different**"
        print(
            f"| {leg.concurrency} | {leg.live_calls} | {leg.wall_s:.1f} | {ideal:.1f} | "
            f"{leg.wall_s / ideal:.2f} | {leg.max_in_flight} | "
            f"{1000 * leg.cpu_s / leg.live_calls:.2f} | {same} | {leg.tables[:12]} |"
        )
    calls_differ = len({leg.live_calls for leg in legs}) > 1
    if calls_differ:
        print("\nThe live calls differ between concurrencies.")
    return not calls_differ and all(leg.tables == legs[0].tables for leg in legs)


def put_seconds(cache: ResponseCache, keys: list[str], threads: int) -> float:
    """Wall time of one `put_completion` per key, the keys split over `threads` threads."""
    shares = [keys[i::threads] for i in range(threads)]
    barrier = threading.Barrier(threads + 1)

    def write(share: list[str]) -> None:
        barrier.wait()
        for key in share:
            cache.put_completion(key, "latency-sim", "a reply of a few words " * 8, 400, 40)

    workers = [threading.Thread(target=write, args=(share,)) for share in shares]
    for worker in workers:
        worker.start()
    barrier.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    return time.perf_counter() - started


def cache_costs(server: LatencyServerProcess, tmp: Path, judge: dict[str, Any], writes: int) -> None:
    cache = ResponseCache(tmp / "puts.sqlite")
    one = put_seconds(cache, [f"one-{i}" for i in range(writes)], 1) / writes
    many = put_seconds(cache, [f"many-{i}" for i in range(writes)], 32) / writes
    cache.close()
    warm = tmp / "judge-c1"  # the cache the concurrency-1 judge leg filled
    replays = {c: measure(server, warm, c, judge, judge_workload) for c in (1, 32)}
    print("\n**Response cache under threads**\n")
    print("| measure | value |\n|---|---|")
    print(f"| put_completion (write + passive WAL checkpoint), 1 thread | {one * 1000:.2f} ms per write |")
    print(f"| … from 32 threads at once, wall time / writes | {many * 1000:.2f} ms per write |")
    print(f"| 32 threads / 1 thread, per write | {many / one:.2f} |")
    print(
        f"| judge workload replayed from the warm cache: c=1 / c=32 wall | {replays[1].wall_s:.2f} s / "
        f"{replays[32].wall_s:.2f} s (ratio 32 : 1 = {replays[32].wall_s / replays[1].wall_s:.2f}); "
        f"live calls {replays[1].live_calls} / {replays[32].live_calls} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--latency", type=float, default=0.3, help="seconds per request (the median with --p99)"
    )
    parser.add_argument(
        "--p99",
        type=float,
        default=None,
        help="log-normal latencies with this 99th percentile, longer for long prompts and replies "
        "(tests/capable_server.py: +50%% per 1,000 tokens beyond the first), instead of a fixed one",
    )
    parser.add_argument(
        "--trial-scope",
        choices=["judge_only", "answers"],
        default="judge_only",
        help="judge.trial_scope of the judge workload (answers: every trial writes, aligns and judges anew)",
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--trials", type=int, default=12, help="judge.trials (M) of the judge workload")
    parser.add_argument(
        "--questions-per-type", type=int, default=6, help="judge.questions_per_type of the judge workload"
    )
    parser.add_argument(
        "--size",
        default="medium",
        help="data.size: the generated corpus of both workloads (the default corpus, small, has 26 chunks: "
        "too few to keep 32 requests busy)",
    )
    parser.add_argument("--writes", type=int, default=2000, help="cache writes timed per thread count")
    parser.add_argument("--workload", choices=["index", "judge", "cache"], nargs="+", default=None)
    args = parser.parse_args()
    workloads = args.workload or ["index", "judge", "cache"]
    # every chunk extracted, every differing description summarized, every community reported
    index_settings = {
        "data": {"size": args.size},
        "index": {"llm_max_chunks": None, "max_summaries": None, "report_levels": None, "max_reports": None},
    }
    ok = True
    with (
        tempfile.TemporaryDirectory(prefix="ragtrial-bench-") as name,
        (
            CapableServerProcess(args.latency, args.p99, slots=256)
            if args.p99
            else LatencyServerProcess(args.latency)
        ) as server,
    ):
        tmp = Path(name)
        latency = (
            f"log-normal, median {args.latency * 1000:.0f} ms, p99 {args.p99 * 1000:.0f} ms"
            if args.p99
            else f"{args.latency * 1000:.0f} ms per request"
        )
        print(
            f"Latency-simulating endpoint on 127.0.0.1: {latency}, up to 256 at once; embeddings by feature "
            f"hashing without latency. Concurrencies {args.concurrency}."
        )
        if "index" in workloads:
            legs = [
                measure(
                    server,
                    tmp / f"index-c{c}",
                    c,
                    deep_merge(index_settings, {"index": {"store_path": str(tmp / f"index-c{c}" / "store")}}),
                    index_workload,
                )
                for c in args.concurrency
            ]
            ok &= print_table(
                f"Index build, {args.size} corpus, LLM graph on every chunk, every summary and report",
                legs,
                latency,
            )
        judge = {
            "index": {"store_path": str(tmp / "judge-index")},
            "data": {"size": args.size},
            "judge": {
                "methods": JUDGE_METHODS,
                "trials": args.trials,
                "questions_per_type": args.questions_per_type,
                "trial_scope": args.trial_scope,
            },
        }
        if {"judge", "cache"} & set(workloads):
            # the judged index, built once outside the clock (its calls land in its own cache), at
            # the highest concurrency asked for: its tables are the same at any
            measure(server, tmp / "judge-index-build", max(args.concurrency), judge, build_judged_index)
            legs = [measure(server, tmp / f"judge-c{c}", c, judge, judge_workload) for c in args.concurrency]
            ok &= print_table(
                f"Judge run of notebook 07 ({len(JUDGE_METHODS)} methods, 3 pairs, {args.trials} trials, "
                f"trial_scope {args.trial_scope})",
                legs,
                latency,
            )
        if "cache" in workloads:
            if 1 not in args.concurrency:
                raise SystemExit("the cache replay reads the cache of the concurrency-1 judge leg: include 1")
            cache_costs(server, tmp, judge, args.writes)
    if not ok:
        print("\nResults differ between concurrencies.")
        sys.exit(1)


if __name__ == "__main__":
    main()
