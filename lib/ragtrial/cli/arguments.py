"""Shared argument shapes of the commands."""

from __future__ import annotations

import argparse


def add_batch_arguments(parser: argparse.ArgumentParser, only_help: str = "run only these notebooks") -> None:
    """The batch file, `--set` overrides and `--only`, as every batch command takes them."""
    parser.add_argument("batch", help="params/<batch>.yaml")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting for every run, e.g. --set llm.model=gpt-4o-mini",
    )
    parser.add_argument("--only", action="append", metavar="NOTEBOOK", help=only_help)
