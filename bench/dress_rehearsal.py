"""Dress rehearsal (issue 36): a paper batch run end to end against the simulated capable endpoint.

The endpoint (`tests/capable_server.py`, a process of its own on 127.0.0.1) answers every request
the kit sends with a valid reply after a log-normal latency (median / p99 set here, longer for long
prompts and replies), `--slots` at once, 429 + Retry-After beyond `--rate`, all times scaled by
`--time-scale` (0.01: a hundredth of real time). The batch runs once cold (its own outputs folder,
cache included) and once warm (`--force`: every call from the cache). One row per leg:
  planned_calls   `ragtrial estimate`'s calls for the batch with the same overrides
  live_calls      model calls the ledgers record as live (cached: replayed), failures
  wall_s          the `ragtrial run` process's wall time (scaled time, as the endpoint served it)
  latency_sum_s   Σ unscaled latency of the calls served (what a real endpoint would spend)
  ideal_s         Σ scaled latency / slots: the endpoint's own limit at this time scale
  kit_cpu_ms_per_call  CPU seconds of the run's process tree (user + system), per live call
  peak_rss_mib    the largest summed RSS of the run's process tree, sampled every 0.2 s
  outputs_mib     the outputs folder (cache, indexes, reports) after the leg
  requests, refused  what the endpoint served and refused with 429
Writes `<out>.csv` and `<out>.md`. Size is set with `--set` (a stated fraction of the batch).

    .venv/bin/python bench/dress_rehearsal.py params/paper_questions.yaml \
        --only 02_question_entity_distribution --set questions.summary_questions=10 --time-scale 0.01
        [--median 0.8 --p99 5 --slots 64 --rate 50] [--concurrency 32] [--out bench_dress_rehearsal]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import psutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # test-side code, as tests use it

from capable_server import CapableServerProcess  # noqa: E402

from ragtrial.llm.ledger import read_ledger, summarize  # noqa: E402

# `make bench`'s leg: notebook 02 of the question batch at 155 planned calls (full: 50,621, an upper bound)
DEFAULT_BATCH = "params/paper_questions.yaml"
DEFAULT_ONLY = ["02_question_entity_distribution"]
DEFAULT_SET = [
    "questions.summary_questions=10",
    "questions.personas=1",
    "questions.tasks_per_persona=2",
    "questions.questions_per_task=5",
    "questions.per_level=5",
    "questions.summary_chunks=20",
]


def ragtrial(*args: str) -> list[str]:
    return [sys.executable, "-m", "ragtrial", *args]


def planned_calls(batch: str, overrides: list[str], only: list[str], folder: Path) -> int:
    """The batch's calls by `ragtrial estimate` (no model call)."""
    table = folder / "estimate.csv"
    subprocess.run(
        ragtrial("estimate", batch, *overrides, *only, "--outputs", str(folder / "est"), "--csv", str(table)),
        check=True,
        capture_output=True,
    )
    return int(pd.read_csv(table)["calls"].sum())


def run_measured(command: list[str]) -> tuple[float, float, float, int]:
    """Wall s, CPU s and peak RSS (MiB) of `command`'s process tree, and its exit status."""
    start = time.monotonic()
    process = psutil.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak, cpu = 0, {}
    while process.poll() is None:
        try:
            tree = [process, *process.children(recursive=True)]
            rss = 0
            for p in tree:
                with p.oneshot():
                    rss += p.memory_info().rss
                    times = p.cpu_times()
                    cpu[p.pid] = times.user + times.system  # a child's last sample counts once it is gone
            peak = max(peak, rss)
        except psutil.Error:
            pass
        time.sleep(0.2)
    wall = time.monotonic() - start
    return wall, sum(cpu.values()), peak / 2**20, process.returncode


def folder_mib(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def leg(
    name: str, command: list[str], server: CapableServerProcess, outputs: Path, slots: int, planned: int
) -> dict:
    server.reset_counts()
    wall, cpu, rss, status = run_measured(command)
    stats = server.stats()
    ledgers = [read_ledger(p) for p in outputs.glob("*/ledger.csv")]
    totals = (
        summarize(pd.concat(ledgers))
        if ledgers
        else {"llm_calls_live": 0, "llm_calls_cached": 0, "failures": 0}
    )
    live = totals["llm_calls_live"]
    return {
        "leg": name,
        "exit": status,
        "planned_calls": planned,
        "live_calls": live,
        "cached_calls": totals["llm_calls_cached"],
        "failures": totals["failures"],
        "requests": int(stats["requests"]),
        "refused": int(stats["refused"]),
        "wall_s": round(wall, 1),
        "latency_sum_s": round(stats["latency_s"], 1),  # unscaled: what a real endpoint would take
        "ideal_s": round(stats["latency_s"] * server.options["time_scale"] / slots, 3),
        "kit_cpu_s": round(cpu, 1),
        "kit_cpu_ms_per_call": round(1000 * cpu / live, 1) if live else None,
        "peak_rss_mib": round(rss),
        "outputs_mib": round(folder_mib(outputs), 1),
    }


def markdown_table(table: pd.DataFrame) -> str:
    cells = [[str(v) for v in row] for row in table.itertuples(index=False)]
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    return "\n".join([*lines, *("| " + " | ".join(row) + " |" for row in cells)]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("batch", nargs="?", default=DEFAULT_BATCH)
    parser.add_argument("--set", action="append", default=None, metavar="KEY=VALUE")
    parser.add_argument("--only", action="append", default=None)
    parser.add_argument("--median", type=float, default=0.8)
    parser.add_argument("--p99", type=float, default=5.0)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--rate", type=float, default=None, help="requests per second before 429s")
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--out", default="bench_dress_rehearsal")
    args = parser.parse_args()
    if args.batch == DEFAULT_BATCH:  # `make bench`: the small proof of docs/performance.md
        args.set = DEFAULT_SET if args.set is None else args.set
        args.only = DEFAULT_ONLY if args.only is None else args.only
    args.set, args.only = args.set or [], args.only or []
    only = [flag for name in args.only for flag in ("--only", name)]
    with (
        tempfile.TemporaryDirectory() as tmp,
        CapableServerProcess(
            args.median, args.p99, args.slots, time_scale=args.time_scale, rate_per_s=args.rate
        ) as server,
    ):
        folder, outputs = Path(tmp), Path(tmp) / "outputs"
        overrides = [
            flag
            for setting in [
                f"llm.base_url={server.base_url}",
                "llm.model=capable-sim",
                f"llm.concurrency={args.concurrency}",
                *args.set,
            ]
            for flag in ("--set", setting)
        ]
        planned = planned_calls(args.batch, overrides, only, folder)
        command = ragtrial("run", args.batch, *overrides, *only, "--outputs", str(outputs))
        rows = [
            leg("cold", command, server, outputs, args.slots, planned),
            leg("warm", [*command, "--force"], server, outputs, args.slots, planned),
        ]
    table = pd.DataFrame(rows)
    table.insert(0, "batch", Path(args.batch).stem)
    table.to_csv(f"{args.out}.csv", index=False)
    markdown = markdown_table(table)
    Path(f"{args.out}.md").write_text(markdown)
    print(markdown)
    sys.exit(int((table["exit"] != 0).any()))


if __name__ == "__main__":
    main()
