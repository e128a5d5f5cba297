"""`ragtrial run params/<batch>.yaml [--set key.sub=value ...]`, `ragtrial estimate params/<batch>.yaml
[--set ...] [--only NB]` and `ragtrial settings [SECTION]` (also `python -m ragtrial`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import textwrap
from pathlib import Path

from ragtrial.config.base import ParamsError
from ragtrial.config.batch import parse_set_overrides
from ragtrial.config.settings import describe_settings
from ragtrial.redact import redact_url


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def print_settings(section: str | None) -> None:
    """Every dotted key (of `section`) with its type, default and description."""
    for row in describe_settings(section):
        print(row.key, row.type if row.default is None else f"{row.type} = {row.default}", sep="  ")
        print(textwrap.fill(row.description, width=100, initial_indent="    ", subsequent_indent="    "))


def print_estimate(args: argparse.Namespace) -> int:
    """`ragtrial estimate`: the readable table on stdout, optionally CSV / JSON files; exit 2 on a
    params error, as `run`.
    """
    from ragtrial.runner.estimate import estimate_batch, render

    try:
        table, notes = estimate_batch(
            args.batch,
            parse_set_overrides(args.overrides),
            root=Path.cwd(),
            outputs=args.outputs,
            only=args.only,
        )
    except ParamsError as err:
        print(f"error: {redact_url(str(err))}", file=sys.stderr)
        return 2
    print(render(table, notes))
    if args.csv:
        table.to_csv(args.csv, index=False)
    if args.json:
        table.to_json(args.json, orient="records", indent=1)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ragtrial", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute a batch of notebooks with papermill")
    run.add_argument("batch", help="params/<batch>.yaml")
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting for every run, e.g. --set llm.model=gpt-4o-mini",
    )
    run.add_argument("--only", action="append", metavar="NOTEBOOK", help="run only these notebooks")
    run.add_argument("--force", action="store_true", help="re-run completed runs (the cache still applies)")
    run.add_argument(
        "--retry-failures",
        action="store_true",
        help="ask the model again for the replies the cache recorded as validation failures "
        "(otherwise they are replayed and counted, paying nothing); the run ids stay the same",
    )
    run.add_argument("--workers", type=int, help="parallel notebook executions (default: the batch's)")
    run.add_argument("--outputs", help="outputs folder (default: ./outputs)")
    run.add_argument("--show-code", action="store_true", help="keep code cells in report.html")
    estimate = sub.add_parser(
        "estimate",
        help="dry run of a batch: calls, tokens, cache hits, time and cost per notebook; no model call",
    )
    estimate.add_argument("batch", help="params/<batch>.yaml")
    estimate.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="as for run"
    )
    estimate.add_argument("--only", action="append", metavar="NOTEBOOK", help="estimate only these notebooks")
    estimate.add_argument(
        "--outputs", help="outputs folder whose ledgers give measured latencies (default: ./outputs)"
    )
    estimate.add_argument("--csv", help="also write the per-stage table to this CSV file")
    estimate.add_argument("--json", help="also write the per-stage table to this JSON file (records)")
    listing = sub.add_parser(
        "settings", help="list every settings key with its type, default and description"
    )
    listing.add_argument(
        "section", nargs="?", help="only this section or key, e.g. retrieval or llm.embedded"
    )
    args = parser.parse_args(argv)
    if args.command == "settings":
        try:
            print_settings(args.section)
        except ParamsError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.command == "estimate":
        return print_estimate(args)
    if args.retry_failures:
        from ragtrial.llm.middleware import RETRY_FAILURES_ENV

        # read by every model call, papermill's kernels included (inherited environment); the
        # settings, and so the run ids, do not change
        os.environ[RETRY_FAILURES_ENV] = "1"
    from ragtrial.runner.batch import run_batch

    signal.signal(signal.SIGTERM, _interrupt)  # a scheduler's stop is handled like Ctrl-C
    try:
        results = run_batch(
            args.batch,
            parse_set_overrides(args.overrides),
            root=Path.cwd(),
            outputs=args.outputs,
            only=args.only,
            force=args.force,
            workers=args.workers,
            show_code=args.show_code,
        )
    except ParamsError as err:
        print(f"error: {redact_url(str(err))}", file=sys.stderr)  # a bad value may quote a URL's user-info
        return 2
    except KeyboardInterrupt:
        print(
            "interrupted: the run is recorded as interrupted; run the same command again to resume "
            "from the cache",
            file=sys.stderr,
        )
        return 130
    outputs = Path(args.outputs).resolve() if args.outputs else Path.cwd() / "outputs"
    not_done = [r for r in results if r.status in ("failed", "locked")]
    for r in not_done:
        reason = r.error.splitlines()[0] if r.error else "no reason recorded"
        print(f"{r.status.upper()} {r.run_id}: {reason} (see {r.run_dir})", file=sys.stderr)
    print(outputs / "index.html")
    return 1 if not_done else 0
