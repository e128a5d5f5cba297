"""Dress rehearsal (issue 36): paper batches run end to end against the simulated capable endpoint.

The endpoint (`tests/capable_server.py`, a process of its own on 127.0.0.1) answers every request
the kit sends with a valid reply after a log-normal latency (median / p99 set here, longer for long
prompts and replies), `--slots` at once, 429 + Retry-After beyond `--rate`, all times scaled by
`--time-scale` (0.01: a hundredth of real time). Each batch runs once cold (its own outputs folder,
cache included) and once warm (`--force`: every call from the cache), on the threads engine or, with
`--ray-nodes N`, on a loopback Ray cluster of N one-CPU nodes (`tests/ray_cluster.py`, started before
the clock; its nodes' CPU and RSS are counted with the run's). One row per batch and leg:
  planned_full    `ragtrial estimate`'s calls for the batch at its stated size
  planned_run     the same at the size run (`run_size`: the settings set)
  live_calls      model calls the ledgers record as live (cached: replayed), failures
  wall_s          the `ragtrial run` process's wall time (scaled time, as the endpoint served it)
  latency_sum_s   Σ unscaled latency of the calls served (what a real endpoint would spend)
  ideal_s         Σ scaled latency / slots: the endpoint's own limit at this time scale
  ideal_at_concurrency_s, wall_over_ideal  Σ scaled latency / min(concurrency, slots): the limit of a
                  run that keeps `--concurrency` calls in flight; the wall time over it
  index_builds    each index the cold leg built with model calls: its build time (the manifest's) over
                  its ideal, Σ latency of its calls (the ledger's, which counts the kit's own waits
                  too: ~0.4 % above the endpoint's at c=32 in the paper index batch) / concurrency
  kit_cpu_ms_per_call  CPU seconds of the run's process tree (user + system), per live call
  peak_rss_mib    the largest summed RSS of the run's process tree, sampled every 0.2 s
  outputs_mib     the outputs folder (cache, indexes, reports) after the leg
  requests, refused  what the endpoint served and refused with 429
  load_1m         the machine's 1-minute load average (`uptime`) at the leg's start and end
  estimate_within_bounds  calls made vs the estimate's bases (exact: equal; upper bound: not above)
  stages_within_bounds    the same per run and group of ledger stages (`compare_with_ledger`)
  reports, largest_report_kib, slowest_load_s  each report.html's size and headless Chromium's load
                  time (its screenshot's wall time less a blank page's); per report in `<out>_reports`
Then, for each batch run below its stated size, its full-size figures extrapolated from the per-call
ones (`extrapolated` states the model) in `<out>_full_size`. Writes `<out>.csv` and `<out>.md`,
after every batch.

    .venv/bin/python bench/dress_rehearsal.py          # `make bench`: notebook 02 at 155 planned calls
    .venv/bin/python bench/dress_rehearsal.py --plan   # every params/paper_*.yaml and seed_stores.yaml
        [BATCH ...] [--set KEY=VALUE ...] [--only NOTEBOOK] [--ray-nodes 2] [--time-scale 0.01]
        [--median 0.8 --p99 5 --slots 64 --rate 50] [--concurrency 32] [--out bench_dress_rehearsal]
        [--keep FOLDER]   # each batch's outputs kept in FOLDER/<n>/outputs (else a temporary folder)
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from pathlib import Path

import pandas as pd
import psutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # test-side code, as tests use it

from capable_server import CapableServerProcess  # noqa: E402
from postgres_server import SUPERUSER, PostgresServer, running_postgres  # noqa: E402
from ray_cluster import LocalRayCluster  # noqa: E402

from ragtrial.llm.ledger import read_ledger, summarize  # noqa: E402
from ragtrial.report.screenshots import chromium, screenshot  # noqa: E402
from ragtrial.runner.batch_estimate import compare_with_ledger  # noqa: E402

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


def run_measured(command: list[str], others: Callable[[], set[int]] = set) -> tuple[float, float, float, int]:
    """Wall s, CPU s and peak RSS (MiB) of `command`'s process tree and of the processes `others`
    names (a Ray cluster's nodes: their CPU counted from the start, their RSS whole), and its exit
    status.
    """
    before = {pid: cpu_s(psutil.Process(pid)) for pid in others()}
    start = time.monotonic()
    process = psutil.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak, cpu = 0, {}
    while process.poll() is None:
        try:
            tree = [process, *process.children(recursive=True), *map(psutil.Process, others())]
            rss = 0
            for p in tree:
                with p.oneshot():
                    rss += p.memory_info().rss
                    cpu[p.pid] = cpu_s(p)  # a child's last sample counts once it is gone
            peak = max(peak, rss)
        except psutil.Error:
            pass
        time.sleep(0.2)
    wall = time.monotonic() - start
    used = sum(seconds - before.get(pid, 0.0) for pid, seconds in cpu.items())
    return wall, used, peak / 2**20, process.returncode


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def folder_mib(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def leg(
    name: str,
    command: list[str],
    server: CapableServerProcess,
    outputs: Path,
    slots: int,
    concurrency: int,
    others: Callable[[], set[int]] = set,
) -> dict:
    server.reset_counts()
    load_before = os.getloadavg()[0]
    wall, cpu, rss, status = run_measured(command, others)
    stats = server.stats()
    ledgers = [read_ledger(p) for p in outputs.glob("*/ledger.csv")]
    totals = (
        summarize(pd.concat(ledgers))
        if ledgers
        else {"llm_calls_live": 0, "llm_calls_cached": 0, "failures": 0}
    )
    live = totals["llm_calls_live"]
    ideal = stats["latency_s"] * server.options["time_scale"] / min(concurrency, slots)
    return {
        "leg": name,
        "exit": status,
        "live_calls": live,
        "cached_calls": totals["llm_calls_cached"],
        "failures": totals["failures"],
        "requests": int(stats["requests"]),
        "refused": int(stats["refused"]),
        "wall_s": round(wall, 1),
        "latency_sum_s": round(stats["latency_s"], 1),  # unscaled: what a real endpoint would take
        "ideal_s": round(stats["latency_s"] * server.options["time_scale"] / slots, 3),
        "ideal_at_concurrency_s": round(ideal, 3),
        "wall_over_ideal": round(wall / ideal, 2) if ideal else None,
        "kit_cpu_s": round(cpu, 1),
        "kit_cpu_ms_per_call": round(1000 * cpu / live, 1) if live else None,
        "peak_rss_mib": round(rss),
        "outputs_mib": round(folder_mib(outputs), 1),
        "load_1m": f"{load_before:.1f}-{os.getloadavg()[0]:.1f}",  # `uptime`'s, at the start and end
    }


def estimate_rows(batch: str, overrides: list[str], only: list[str], folder: Path) -> pd.DataFrame:
    """`ragtrial estimate`'s table for the batch (no model call): one row per run and stage."""
    folder.mkdir(parents=True, exist_ok=True)
    table = folder / "estimate.csv"
    done = subprocess.run(
        ragtrial("estimate", batch, *overrides, *only, "--outputs", str(folder / "est"), "--csv", str(table)),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ragtrial estimate {batch}: {done.stderr.strip().splitlines()[-1:]}")
    return pd.read_csv(table)


def within_bounds(planned: pd.DataFrame, made: int) -> str:
    """Whether the calls made are what the estimate's bases promise: exact rows equal, upper bounds
    not exceeded; a projected row bounds nothing (said so).
    """
    bases = set(planned["basis"])
    total = int(planned["calls"].sum())
    if bases <= {"exact"}:
        return "yes" if made == total else f"no ({made} vs {total} exact)"
    if "projected" in bases:
        return f"projected ({made} of {total})"
    return "yes" if made <= total else f"no ({made} > {total})"


BLANK_PAGE = "<!doctype html><title>blank</title>"


def stages_within_bounds(planned: pd.DataFrame, outputs: Path) -> str:
    """Each run's calls per group of ledger stages against its estimate's basis (`compare_with_ledger`:
    exact equal, upper bound not exceeded): "yes", or every group that disagrees.
    """
    wrong = []
    for run_id, rows in planned.groupby("run_id", sort=False):
        ledger = outputs / str(run_id) / "ledger.csv"
        if not ledger.is_file():
            wrong.append(f"{run_id}: no ledger")
            continue
        stages = [tuple(ast.literal_eval(s)) if isinstance(s, str) else () for s in rows["ledger_stages"]]
        compared = compare_with_ledger(rows.assign(ledger_stages=stages), read_ledger(ledger))
        wrong += [
            f"{run_id} {r.stages}: {r.made} made, {r.planned} {r.basis}"
            for r in compared.itertuples()
            if not r.agrees
        ]
    return "yes" if not wrong else "no: " + "; ".join(wrong)


def report_loads(outputs: Path, browser: str, folder: Path) -> list[dict]:
    """Each report's HTML size and its Chromium load time: the screenshot's wall time less a blank
    page's (Chromium's own start, the faster of two tries).
    """
    blank = folder / "blank.html"
    blank.write_text(BLANK_PAGE)

    def drawn_in(page: Path) -> float:
        start = time.monotonic()
        screenshot(page, folder / "shot.png", browser=browser)
        return time.monotonic() - start

    start_s = min(drawn_in(blank) for _ in range(2))
    return [
        {
            "report": page.parent.name,
            "html_kib": round(page.stat().st_size / 1024),
            "load_s": round(max(0.0, drawn_in(page) - start_s), 2),
        }
        for page in sorted(outputs.glob("*/report.html"))
    ]


def markdown_table(table: pd.DataFrame) -> str:
    cells = [["–" if pd.isna(v) else str(v) for v in row] for row in table.itertuples(index=False)]
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    return "\n".join([*lines, *("| " + " | ".join(row) + " |" for row in cells)]) + "\n"


def endpoint_overrides(server: CapableServerProcess, concurrency: int) -> list[str]:
    """The batch's model and its embeddings on the simulated endpoint (no local embedding model: the
    rehearsal measures the kit, not sentence-transformers on this CPU).
    """
    return [
        f"llm.base_url={server.base_url}",
        "llm.backend=openai_compatible",
        "llm.model=capable-sim",
        f"llm.concurrency={concurrency}",
        "embeddings.backend=openai_compatible",
        f"embeddings.base_url={server.base_url}",
        "embeddings.model=hashing-64",
    ]


def as_flags(settings: list[str]) -> list[str]:
    return [flag for setting in settings for flag in ("--set", setting)]


def store_overrides(postgres: PostgresServer) -> list[str]:
    """A fresh database of the rehearsal's own PostgreSQL as the batch's `store.url`; the password goes
    in $PGPASSWORD (libpq reads it), never on a command line or in a table.
    """
    database = postgres.create_database("rehearsal").rsplit("/", 1)[1]
    os.environ["PGPASSWORD"] = postgres.password
    return [f"store.url=postgresql://{SUPERUSER}@{postgres.host}:{postgres.port}/{database}"]


def rehearse(
    batch: str,
    size: list[str],
    only: list[str],
    server: CapableServerProcess,
    args: argparse.Namespace,
    folder: Path,
    cluster: LocalRayCluster | None = None,
    stores: list[str] | None = None,
) -> tuple[list[dict], list[dict]]:
    """The batch cold then warm at `size` (settings); its rows, and its reports' sizes and loads.
    `stores`: settings of the stores the rehearsal started for it (`store.url`).
    """
    outputs = folder / "outputs"
    endpoint = [*endpoint_overrides(server, args.concurrency), *(stores or [])]
    only_flags = [flag for name in only for flag in ("--only", name)]
    row: dict = {
        "batch": Path(batch).stem,
        "engine": f"ray, {args.ray_nodes} nodes" if cluster else "threads",
    }
    try:
        full = estimate_rows(batch, as_flags(endpoint), only_flags, folder / "full")
        row["planned_full"] = int(full["calls"].sum())
    except RuntimeError as err:
        full, row["planned_full"] = None, f"estimate failed: {err}"
    size = [*size, *PLAN_EXTRA.get(Path(batch).stem, [])] if args.plan else size
    planned = estimate_rows(batch, as_flags([*endpoint, *size]), only_flags, folder / "run")
    row["planned_run"] = int(planned["calls"].sum())
    row["run_size"] = " ".join(size) or "full"
    command = ragtrial("run", batch, *as_flags([*endpoint, *size]), *only_flags, "--outputs", str(outputs))
    others: Callable[[], set[int]] = set
    if cluster is not None:
        command += ["--engine", "ray", "--address", cluster.address]
        others = lambda: set().union(*(cluster.node_pids(n) for n in range(cluster.n_nodes)))  # noqa: E731
    cold = leg("cold", command, server, outputs, args.slots, args.concurrency, others)
    cold["index_builds"] = index_builds(outputs, args.concurrency)
    cold["estimate_within_bounds"] = within_bounds(planned, cold["live_calls"] + cold["cached_calls"])
    cold["stages_within_bounds"] = stages_within_bounds(planned, outputs)
    loads = report_loads(outputs, args.browser, folder) if args.browser else []
    cold["reports"] = len(loads)
    cold["largest_report_kib"] = max((r["html_kib"] for r in loads), default=None)
    cold["slowest_load_s"] = max((r["load_s"] for r in loads), default=None)
    warm = leg("warm", [*command, "--force"], server, outputs, args.slots, args.concurrency, others)
    if cold["exit"] != 0:
        cold["error"] = last_error(outputs)
    rows = [row | cold, row | warm]
    return rows, [{"batch": row["batch"], **r} for r in loads]


def index_builds(outputs: Path, concurrency: int) -> str:
    """'<build s> / <ideal s> = <ratio>' for each index built with model calls under `outputs` (the
    ledger's latencies are as served, at the rehearsal's time scale, like the build's wall time).
    """
    built = []
    for manifest in sorted(outputs.glob("indexes/*/manifest.json")):
        record = json.loads(manifest.read_text())
        # the model calls' latency (the embeddings' aside: the simulated endpoint serves them at once)
        model_s = sum(
            row["latency_s"] for row in record.get("ledger", []) if row["stage"] != "index_embeddings"
        )
        if model_s:
            wall, ideal = record["build_wall_s"], model_s / concurrency
            built.append(f"{wall:.1f} / {ideal:.1f} = {wall / ideal:.2f}")
    return "; ".join(built) or "–"


def last_error(outputs: Path) -> str:
    """The first failed run's error, from its run.json."""
    for record in sorted(outputs.glob("*/run.json")):
        run = json.loads(record.read_text())
        if run.get("status") != "completed":
            return f"{record.parent.name}: {str(run.get('error', run.get('status')))[:300]}"
    return "no run failed (see the run's stderr)"


def extrapolated(rows: pd.DataFrame) -> pd.DataFrame:
    """Full-size figures from the run's per-call ones, for a batch run below its stated size. Model:
    the warm leg is the fixed cost (kernels, imports, rendering, cache reads); each live call adds
    the cold leg's CPU beyond the warm leg's, divided by its live calls; outputs grow in proportion
    to the calls; peak RSS is the run's plus that growth of the outputs (as if everything the run
    writes were held at once: the notebooks hold their tables, the cache and indexes are on disk);
    the endpoint's ideal at full size is the mean unscaled latency per call x full calls / slots;
    the wall is the fixed cost plus the larger of that ideal and the calls' CPU on one core (the
    run's one interpreter drives its calls).
    """
    out = []
    for batch, legs in rows.groupby("batch", sort=False):
        if set(legs["leg"]) != {"cold", "warm"}:
            continue
        cold = legs[legs["leg"] == "cold"].iloc[0]
        warm = legs[legs["leg"] == "warm"].iloc[0]
        made = cold["live_calls"] + cold["cached_calls"]
        full = pd.to_numeric(cold["planned_full"], errors="coerce")
        if pd.isna(full) or not cold["live_calls"] or cold["exit"] != 0 or cold["run_size"] == "full":
            continue
        per_call_cpu = max(0.0, cold["kit_cpu_s"] - warm["kit_cpu_s"]) / cold["live_calls"]
        mean_latency = cold["latency_sum_s"] / max(1, cold["requests"])
        ideal = mean_latency * full / SLOTS_FOR_EXTRAPOLATION
        outputs_full = cold["outputs_mib"] * full / max(1, made)
        out.append(
            {
                "batch": batch,
                "calls_run": made,
                "calls_full": int(full),
                "ideal_full_h": round(ideal / 3600, 2),
                "kit_cpu_ms_per_call": round(1000 * per_call_cpu, 1),
                "wall_full_h": round((warm["wall_s"] + max(ideal, full * per_call_cpu)) / 3600, 2),
                "cpu_full_h": round((warm["kit_cpu_s"] + full * per_call_cpu) / 3600, 2),
                "rss_full_gib": round((cold["peak_rss_mib"] + outputs_full - cold["outputs_mib"]) / 1024, 1),
                "outputs_full_gib": round(outputs_full / 1024, 1),
            }
        )
    return pd.DataFrame(out)


SLOTS_FOR_EXTRAPOLATION = 64

# --plan: every paper batch, each at one reduced size (the same settings for all, so the sizes are
# stated once); the calls it makes are `planned_run`, the stated size's `planned_full`.
PLAN_SIZE = [
    "index.llm_max_chunks=32",
    "data.limit_questions=16",
    "data.limit_documents=48",
    "questions.summary_questions=6",
    "questions.personas=2",
    "questions.tasks_per_persona=1",
    "questions.questions_per_task=2",
    "questions.per_level=4",
    "questions.summary_chunks=4",
    "questions.min_hops=5",
    "judge.questions_per_type=4",
    "judge.trials=3",
    "qa.questions_per_type=3",
    "diagnostics.questions_per_type=8",
    "summarization.questions_per_type=2",
    "claims.n_questions=3",
    "calibration.studies=3",
    "calibration.simulated_trials=[1, 5]",
    "calibration.simulated_repeats=[1]",
    "calibration.simulated_questions=[20]",
    "calibration.workers=1",
]
# ... and per batch, where its stated size is set otherwise (the generated corpus's preset).
PLAN_EXTRA = {"paper_scale_study": ["data.size=small"]}
# batches that search a PostgreSQL database: the rehearsal starts one (tests/postgres_server.py, on
# 127.0.0.1) and gives each such batch a fresh database of it
NEEDS_POSTGRES = {"seed_stores"}
PLAN = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "params").glob("paper_*.yaml")) + [
    "params/seed_stores.yaml"
]


def write_tables(rows: list[dict], loads: list[dict], out: str) -> None:
    table = pd.DataFrame(rows)
    table.to_csv(f"{out}.csv", index=False)
    parts = [markdown_table(table)]
    if loads:
        pd.DataFrame(loads).to_csv(f"{out}_reports.csv", index=False)
        parts.append(markdown_table(pd.DataFrame(loads)))
    projection = extrapolated(table)
    if not projection.empty:
        projection.to_csv(f"{out}_full_size.csv", index=False)
        parts.append(markdown_table(projection))
    markdown = "\n".join(parts)
    Path(f"{out}.md").write_text(markdown)
    print(markdown, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("batch", nargs="*", help="params files (default: the `make bench` leg)")
    parser.add_argument("--plan", action="store_true", help="every paper batch at PLAN_SIZE")
    parser.add_argument("--set", action="append", default=None, metavar="KEY=VALUE")
    parser.add_argument("--only", action="append", default=None)
    parser.add_argument("--median", type=float, default=0.8)
    parser.add_argument("--p99", type=float, default=5.0)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--rate", type=float, default=None, help="requests per second before 429s")
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--ray-nodes", type=int, default=0, help="run on a loopback Ray cluster of N nodes")
    parser.add_argument("--out", default="bench_dress_rehearsal")
    parser.add_argument("--keep", type=Path, default=None, help="keep each batch's outputs under this folder")
    args = parser.parse_args()
    args.browser = chromium()
    if args.plan:
        batches, size, only = args.batch or PLAN, args.set or PLAN_SIZE, args.only or []
    elif not args.batch:  # `make bench`: the small proof of docs/performance.md
        batches, size, only = [DEFAULT_BATCH], args.set or DEFAULT_SET, args.only or DEFAULT_ONLY
    else:
        batches, size, only = args.batch, args.set or [], args.only or []
    rows: list[dict] = []
    loads: list[dict] = []
    postgres: PostgresServer | None = None  # started for the first batch that needs one
    with (
        ExitStack() as stack,
        nullcontext(str(args.keep)) if args.keep else tempfile.TemporaryDirectory() as tmp,
        CapableServerProcess(
            args.median, args.p99, args.slots, time_scale=args.time_scale, rate_per_s=args.rate
        ) as server,
        LocalRayCluster(nodes=args.ray_nodes, cpus_per_node=1)
        if args.ray_nodes
        else nullcontext() as cluster,
    ):
        for n, batch in enumerate(batches):
            print(f"{time.strftime('%H:%M:%S')} {batch}", file=sys.stderr, flush=True)
            try:
                stores = []
                if Path(batch).stem in NEEDS_POSTGRES:
                    postgres = postgres or stack.enter_context(running_postgres())
                    stores = store_overrides(postgres)
                batch_rows, batch_loads = rehearse(
                    batch, size, only, server, args, Path(tmp) / str(n), cluster, stores
                )
            except (RuntimeError, subprocess.SubprocessError, OSError) as err:
                batch_rows, batch_loads = (
                    [{"batch": Path(batch).stem, "exit": "error", "error": str(err)}],
                    [],
                )
            rows += batch_rows
            loads += batch_loads
            write_tables(rows, loads, args.out)  # after each batch: a long plan keeps what it measured
    failed = any(row.get("exit") != 0 for row in rows)
    sys.exit(int(failed))


if __name__ == "__main__":
    main()
