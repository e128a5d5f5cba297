"""`ragtrial export mlflow [RUN ...|--batch NAME] [--tracking-uri URI] [--experiment NAME] [--outputs DIR]`:
completed runs logged as MLflow runs (`runner.mlflow_export`): params, metrics, tags and artifacts read
from their run folders, secrets masked; a run exported before is updated, not added again. Without RUN
or --batch, every completed run of the outputs folder. Needs the extra `ragtrial[mlflow]`.
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    export = sub.add_parser("export", help="log completed runs to a tracking system (mlflow)")
    targets = export.add_subparsers(dest="target", required=True)
    mlflow = targets.add_parser(
        "mlflow",
        help="each completed run as an MLflow run (params, metrics, tags, artifacts); a run exported "
        "before is updated, not duplicated; needs ragtrial[mlflow]",
    )
    mlflow.add_argument("runs", nargs="*", metavar="RUN", help="run ids or unique prefixes of them")
    mlflow.add_argument(
        "--batch", metavar="NAME", help="the completed runs of this batch file (params/x.yaml, x.yaml or x)"
    )
    mlflow.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="http(s)://host:port of an MLflow server, sqlite:///file.db, ... (default: "
        "$MLFLOW_TRACKING_URI, else sqlite:///<outputs>/mlflow.db)",
    )
    mlflow.add_argument("--experiment", default="ragtrial", help="MLflow experiment (default: ragtrial)")
    mlflow.add_argument("--outputs", help="outputs folder holding the runs (default: <project>/outputs)")
    mlflow.set_defaults(handler=export_mlflow_command)


def export_mlflow_command(args: argparse.Namespace) -> int:
    """One line per exported run; exit 1 (one line) when the tracking store cannot be reached, 2 (from
    `main`) for a run that cannot be named or did not complete, or a missing extra.
    """
    from ragtrial.cli.list_runs import batch_runs
    from ragtrial.config.base import ParamsError
    from ragtrial.config.paths import outputs_dir, project_root
    from ragtrial.runner.compared_runs import completed_run
    from ragtrial.runner.mlflow_export import MlflowExport, TrackingUnreachable, default_tracking_uri

    outputs = outputs_dir(project_root(), args.outputs)
    if args.runs and args.batch:
        raise ParamsError("export mlflow: name runs or --batch, not both")
    if args.runs:
        runs = [completed_run(outputs, target) for target in args.runs]
    else:
        runs = [r for r in batch_runs(outputs, args.batch) if (r.record or {}).get("status") == "completed"]
    if not runs:
        print(f"no completed run in {outputs}{f' of batch {args.batch}' if args.batch else ''}")
        return 0
    try:
        tracking = MlflowExport(args.tracking_uri or default_tracking_uri(outputs), args.experiment)
    except TrackingUnreachable as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for run in runs:
        done = tracking.export(run)
        cut = f"; cut to MLflow's limit: {', '.join(done.truncated)}" if done.truncated else ""
        print(
            f"{done.run_id}: {done.action} MLflow run {done.mlflow_run_id} ({done.params} params logged, "
            f"{done.metrics} metrics, {done.artifacts} artifacts{cut})"
        )
    print(f"experiment {args.experiment!r} in {tracking.shown_uri}")
    return 0
