"""The `ragtrial` command line (also `python -m ragtrial`): one module per command, each adding its
parser and handler; the commands are listed once, in `COMMANDS`, in the order `--help` shows them.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from ragtrial.cli import (
    cache,
    check,
    clean,
    compare,
    datasets,
    estimate,
    export,
    init,
    list_runs,
    notebooks,
    open_report,
    query,
    questions,
    run,
    settings,
    systems,
)
from ragtrial.cli.arguments import CommandParser
from ragtrial.cli.version import VersionAction
from ragtrial.config.base import ParamsError
from ragtrial.redact import redact_url

COMMANDS = (
    init,
    check,
    run,
    estimate,
    query,
    list_runs,
    open_report,
    compare,
    export,
    clean,
    settings,
    notebooks,
    datasets,
    questions,
    systems,
    cache,
)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="ragtrial", description=__doc__)
    top.add_argument(
        "--version", action=VersionAction, help="print the version and the kit checkout's git commit"
    )
    sub = top.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    for command in COMMANDS:
        command.add_parser(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    """Exit 0 on success, 1 when the command's work failed, 2 on a params error (named), 130 when
    interrupted.
    """
    args = parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    signal.signal(signal.SIGTERM, _interrupt)  # a scheduler's stop is handled like Ctrl-C
    # A shell starts a background job with SIGINT ignored, and Python then raises no KeyboardInterrupt:
    # `kill -INT` must still stop a run or `open --serve` started that way.
    signal.signal(signal.SIGINT, _interrupt)
    try:
        return args.handler(args)
    except ParamsError as err:
        print(f"error: {redact_url(str(err))}", file=sys.stderr)  # a bad value may quote a URL's user-info
        return 2
    except (PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError) as err:
        # a path given on the command line that cannot be written (or read) as asked: the user's
        # to fix, said in one line rather than as a traceback
        print(f"error: {err.strerror}: {err.filename}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader went away (`ragtrial settings | head`): nothing left to say
        sys.stdout = None
        return 0
    except KeyboardInterrupt:
        print(
            "interrupted: the run is recorded as interrupted; run the same command again to resume "
            "from the cache",
            file=sys.stderr,
        )
        return 130
