"""`ragtrial estimate params/<batch>.yaml [--set k=v] [--only NB] [--csv F] [--json F]`: the dry run."""

from __future__ import annotations

import argparse

from ragtrial.cli.arguments import add_batch_arguments, project_and_batch
from ragtrial.config.base import ParamsError
from ragtrial.config.batch import parse_set_overrides


def add_parser(sub) -> None:
    estimate = sub.add_parser(
        "estimate",
        help="dry run of a batch: calls, tokens, cache hits, time and cost per notebook; no model call",
    )
    add_batch_arguments(estimate, "estimate only these notebooks")
    estimate.add_argument(
        "--outputs",
        help="the runs' outputs folder: its saved indexes (not built again), its ledgers' measured "
        "latencies (default: <project root>/outputs)",
    )
    estimate.add_argument("--csv", help="also write the per-stage table to this CSV file")
    estimate.add_argument("--json", help="also write the per-stage table to this JSON file (records)")
    estimate.set_defaults(handler=print_estimate)


def print_estimate(args: argparse.Namespace) -> int:
    """`ragtrial estimate`: the readable table on stdout, optionally CSV / JSON files."""
    from ragtrial.runner.batch_estimate import estimate_batch, render

    root, batch = project_and_batch(args.batch)
    table, notes = estimate_batch(
        batch,
        parse_set_overrides(args.overrides),
        root=root,
        outputs=args.outputs,
        only=args.only,
    )
    print(render(table, notes))
    writers = {
        "--csv": (args.csv, lambda path: table.to_csv(path, index=False)),
        "--json": (args.json, lambda path: table.to_json(path, orient="records", indent=1)),
    }
    for option, (path, write) in writers.items():
        if not path:
            continue
        try:
            write(path)
        except OSError as err:  # pandas says a missing folder in a plain OSError, without the path
            raise ParamsError(f"{option} {path}: cannot write it ({err.strerror or err})") from None
    return 0
