"""`ragtrial check params/<batch>.yaml [--set k=v] [--only NB] [--outputs DIR]` (also `validate`):
the batch resolved and checked as `ragtrial run` checks it, plus its data sets' gold, a write to each
response cache (rolled back), a real request to each endpoint and the upstream systems' environments
(`runner.checks`); nothing is run.
"""

from __future__ import annotations

import argparse
import sys

from ragtrial.cli.arguments import add_batch_arguments
from ragtrial.config.batch import parse_set_overrides


def add_parser(sub) -> None:
    check = sub.add_parser(
        "check",
        aliases=["validate"],
        help="check a batch without running it: settings, names, paths, the data sets' gold, the response "
        "cache (a write, rolled back), a real request to each endpoint, the upstream systems; exit 2 at a "
        "problem of the batch, 1 at a cache, endpoint or "
        "system that is not ready, naming it",
    )
    add_batch_arguments(check, "check only these notebooks")
    check.add_argument("--outputs", help="outputs folder the runs would write (default: <project>/outputs)")
    check.set_defaults(handler=check_command)


def check_command(args: argparse.Namespace) -> int:
    """Exit 0 with one line per thing checked; 2 (ParamsError, from `main`) at the first problem of
    the batch; 1 at the first endpoint or system that is not ready.
    """
    from ragtrial.config.paths import batch_file, outputs_dir, project_root
    from ragtrial.redact import redact_url
    from ragtrial.runner.checks import NotReady, check_batch

    root = project_root()
    batch = batch_file(args.batch, root)
    try:
        checked = check_batch(
            batch,
            parse_set_overrides(args.overrides),
            root,
            outputs_dir(root, args.outputs),
            args.only,
            reach=True,
        )
    except NotReady as err:
        print(f"not ready: {redact_url(str(err))}", file=sys.stderr)
        return 1
    for line in checked.checked:
        print(f"ok  {line}")
    print(f"{batch}: ready to run ({len(checked.selected)} run{'s' * (len(checked.selected) != 1)})")
    return 0
