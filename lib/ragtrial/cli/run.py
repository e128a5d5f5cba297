"""`ragtrial run params/<batch>.yaml [--set k=v] [--only NB] [--force] [--workers N] [--outputs DIR]
[--engine ray [--address A]] [--mlflow [URI]]` and `ragtrial diagnose params/<batch>.yaml [--baseline F]
[--tolerance T] [--save-baseline F]` (regression mode).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from ragtrial.cli.arguments import add_batch_arguments, project_and_batch
from ragtrial.config.base import ParamsError
from ragtrial.config.batch import parse_set_overrides
from ragtrial.config.paths import outputs_dir


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """`--engine` and `--address`: where the batch's runs execute."""
    parser.add_argument(
        "--engine",
        choices=["threads", "ray"],
        default="threads",
        help="threads: the runs execute on this machine, --workers at a time (default); ray: each run is a "
        "task on a Ray cluster, as many at once as its free resources allow (the batch's `resources`)",
    )
    parser.add_argument(
        "--address",
        metavar="A",
        help="the Ray cluster for --engine ray: auto (one `ray start` started on this machine), host:port "
        "(its GCS) or ray://host:port (Ray Client); default: $RAY_ADDRESS, else a cluster running here, "
        "else a single-node Ray for the batch",
    )


def add_parser(sub) -> None:
    run = sub.add_parser("run", help="execute a batch of notebooks with papermill")
    add_batch_arguments(run)
    run.add_argument("--force", action="store_true", help="re-run completed runs (the cache still applies)")
    run.add_argument(
        "--retry-failures",
        action="store_true",
        help="ask the model again for the replies the cache recorded as validation failures "
        "(otherwise they are replayed and counted, paying nothing); the run ids stay the same",
    )
    run.add_argument("--workers", type=int, help="parallel notebook executions (default: the batch's)")
    run.add_argument(
        "--outputs", help="outputs folder, cache and indexes included (default: <project root>/outputs)"
    )
    run.add_argument("--show-code", action="store_true", help="keep code cells in report.html")
    run.add_argument(
        "--mlflow",
        nargs="?",
        const="",
        metavar="URI",
        help="export each completed run to MLflow as it ends (`ragtrial export mlflow`): the tracking URI "
        "(default: $MLFLOW_TRACKING_URI, else sqlite:///<outputs>/mlflow.db); needs ragtrial[mlflow]",
    )
    add_engine_arguments(run)
    run.set_defaults(handler=run_command)
    check = sub.add_parser(
        "diagnose",
        help="regression mode: run the batch's 09_retrieval_diagnostics runs (a completed run is not re-run) "
        "and exit 1 when a metric falls below its threshold or its baseline by more than the tolerance",
    )
    add_batch_arguments(
        check, "run only these notebooks (default: 09_retrieval_diagnostics, which must be among them)"
    )
    check.add_argument(
        "--baseline",
        metavar="FILE",
        help="baseline JSON (from --save-baseline) to compare with (default: diagnostics.baseline_path)",
    )
    check.add_argument(
        "--tolerance",
        type=float,
        metavar="T",
        help="how far a metric may fall below its baseline (default: diagnostics.tolerance)",
    )
    check.add_argument(
        "--save-baseline", metavar="FILE", help="write the run's summary as a baseline JSON file (one run)"
    )
    check.add_argument("--force", action="store_true", help="re-run completed runs (the cache still applies)")
    check.add_argument("--workers", type=int, help="parallel notebook executions (default: the batch's)")
    check.add_argument(
        "--outputs", help="outputs folder, cache and indexes included (default: <project root>/outputs)"
    )
    add_engine_arguments(check)
    check.set_defaults(show_code=False, mlflow=None, handler=diagnose_command)


def run_notebooks(args: argparse.Namespace, only: list[str] | None) -> tuple[list, list]:
    """The batch's runs (those `only` names) through `run_batch` with the command's options; the
    results, and those not done (failed, locked), each printed on stderr with its reason.
    """
    from ragtrial.runner.batch import run_batch

    root, batch = project_and_batch(args.batch)
    results = run_batch(
        batch,
        parse_set_overrides(args.overrides),
        root=root,
        outputs=args.outputs,
        only=only,
        force=args.force,
        workers=args.workers,
        show_code=args.show_code,
        engine=args.engine,
        address=args.address,
        mlflow=args.mlflow,
    )
    not_done = [r for r in results if r.status in ("failed", "locked")]
    for r in not_done:
        reason = r.error.splitlines()[0] if r.error else "no reason recorded"
        print(f"{r.status.upper()} {r.run_id}: {reason} (see {r.run_dir})", file=sys.stderr)
    return results, not_done


def run_command(args: argparse.Namespace) -> int:
    """`ragtrial run`: exit 1 when a run failed or was locked, else 0; the index's path on stdout."""
    if args.retry_failures:
        from ragtrial.llm.middleware import RETRY_FAILURES_ENV

        # read by every model call, papermill's kernels included (inherited environment); the
        # settings, and so the run ids, do not change. The value names this invocation: a saved
        # index with failures is rebuilt once in it (`index.build.load_or_build_index`).
        os.environ[RETRY_FAILURES_ENV] = f"{os.getpid()}-{time.time_ns()}"
    from ragtrial.runner.checks import NotReady

    try:
        _, not_done = run_notebooks(args, args.only)
    except NotReady as err:  # --mlflow's tracking store, checked before the first run
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(outputs_dir(project_and_batch(args.batch)[0], args.outputs) / "index.html")
    return 1 if not_done else 0


def diagnose_command(args: argparse.Namespace) -> int:
    """`ragtrial diagnose`: run the batch's notebook-09 runs (a completed one is not re-run), check
    each one's diagnostics summary against its thresholds and baseline, print what regressed; exit 1
    when a metric regressed or a run could not be checked, else 0.
    """
    from ragtrial.config.batch import load_batch, settings_hash
    from ragtrial.config.paths import notebooks_dir
    from ragtrial.runner.execute import read_run_json
    from ragtrial.runner.regression import (
        DIAGNOSTICS_NOTEBOOK,
        load_baseline,
        read_summary,
        regressions,
        render_regressions,
        save_baseline,
        summary_path,
    )

    root, batch = project_and_batch(args.batch)
    if args.tolerance is not None and not 0 <= args.tolerance <= 1:
        raise ParamsError(f"--tolerance {args.tolerance}: must be between 0 and 1")
    specs, _ = load_batch(batch, parse_set_overrides(args.overrides), notebooks_dir=notebooks_dir(root))
    diagnosed = {s.run_id: s for s in specs if s.notebook == DIAGNOSTICS_NOTEBOOK}
    if not diagnosed:
        raise ParamsError(
            f"{args.batch}: no run of notebook {DIAGNOSTICS_NOTEBOOK}, so nothing to diagnose "
            f"(its notebooks: {', '.join(dict.fromkeys(s.notebook for s in specs))})"
        )
    only = args.only or [DIAGNOSTICS_NOTEBOOK]
    if DIAGNOSTICS_NOTEBOOK not in only:
        raise ParamsError(
            f"--only {', '.join(only)}: selects no {DIAGNOSTICS_NOTEBOOK} run, so nothing to diagnose"
        )
    if args.save_baseline and len(diagnosed) > 1:
        raise ParamsError(
            f"--save-baseline {args.save_baseline}: {args.batch} has {len(diagnosed)} runs of "
            f"{DIAGNOSTICS_NOTEBOOK} and a baseline holds one run's summary; select one with --set"
        )
    baseline_of = {
        run_id: (root / path if (path := args.baseline or spec.settings.diagnostics.baseline_path) else None)
        for run_id, spec in diagnosed.items()
    }
    # read before any run, so a bad baseline costs no model call
    baselines = {path: load_baseline(path) for path in set(baseline_of.values()) if path}
    results, not_done = run_notebooks(args, only)
    failed = bool(not_done)
    for result in results:
        spec = diagnosed.get(result.run_id)
        if spec is None or result.status not in ("completed", "skipped"):
            continue
        record = read_run_json(result.run_dir) or {}
        if result.status == "skipped":
            commit = record.get("git_commit", "unknown")
            print(
                f"note: {result.run_id} was not re-run (completed at commit {commit}); --force runs it again"
            )
        path, tolerance = baseline_of[result.run_id], spec.settings.diagnostics.tolerance
        tolerance = args.tolerance if args.tolerance is not None else tolerance
        baseline = baselines[path] if path else None
        try:
            summary = read_summary(result.run_dir)
            found = regressions(summary, baseline.frame() if baseline else None, tolerance)
        except (OSError, ValueError) as err:  # no table, or a table that breaks the summary's contract
            print(f"error: {summary_path(result.run_dir)}: {err}", file=sys.stderr)
            failed = True
            continue
        label = f"{path} (run {baseline.run_id}, commit {baseline.git_commit})" if baseline else None
        for line in render_regressions(
            found, run_id=result.run_id, checked=len(summary), baseline=label, tolerance=tolerance
        ):
            print(line)
        failed = failed or not found.empty
        if args.save_baseline:
            try:
                save_baseline(
                    summary,
                    args.save_baseline,
                    run_id=result.run_id,
                    settings_hash=settings_hash(spec.settings),
                    git_commit=record.get("git_commit", "unknown"),
                )
            except (OSError, ValueError) as err:
                print(f"error: --save-baseline {args.save_baseline}: {err}", file=sys.stderr)
                failed = True
                continue
            print(f"baseline saved: {args.save_baseline}")
    return 1 if failed else 0
