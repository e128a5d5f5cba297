"""Shared argument shapes of the commands."""

from __future__ import annotations

import argparse
from pathlib import Path

from ragtrial.config.paths import batch_file, project_root


def add_batch_arguments(parser: argparse.ArgumentParser, only_help: str = "run only these notebooks") -> None:
    """The batch file, `--set` overrides and `--only`, as every batch command takes them."""
    parser.add_argument(
        "batch", help="params/<batch>.yaml (from the working directory, else from the project root)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting for every run, e.g. --set llm.model=gpt-4o-mini",
    )
    parser.add_argument("--only", action="append", metavar="NOTEBOOK", help=only_help)


def project_and_batch(batch: str) -> tuple[Path, Path]:
    """The project root the command works in (`config.paths.project_root`, from the working directory)
    and the batch file `batch` names there (as typed, else under the root).
    """
    root = project_root()
    return root, batch_file(batch, root)


class CommandParser(argparse.ArgumentParser):
    """A command's parser, whose positionals may come after its options (`ragtrial query "question"
    --method naive_rag params/x.yaml`: argparse alone stops taking positionals at the first option).
    A parser with sub-commands of its own parses as argparse does: intermixed parsing cannot hold them.
    """

    has_subcommands = False
    _intermixing = False

    def add_subparsers(self, **kwargs):
        self.has_subcommands = True
        return super().add_subparsers(**kwargs)

    def parse_known_args(self, args=None, namespace=None):
        if self.has_subcommands or self._intermixing:  # the intermixed parse calls back in here
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False
