"""`ragtrial settings [SECTION]`: every key with its type, default and description."""

from __future__ import annotations

import argparse
import textwrap

from ragtrial.config.settings import describe_settings


def add_parser(sub) -> None:
    listing = sub.add_parser("settings", help="list every settings key with its type, default and description")
    listing.add_argument("section", nargs="?", help="only this section or key, e.g. retrieval or llm.embedded")
    listing.set_defaults(handler=settings_command)


def settings_command(args: argparse.Namespace) -> int:
    print_settings(args.section)
    return 0


def print_settings(section: str | None) -> None:
    """Every dotted key (of `section`) with its type, default and description."""
    for row in describe_settings(section):
        print(row.key, row.type if row.default is None else f"{row.type} = {row.default}", sep="  ")
        print(textwrap.fill(row.description, width=100, initial_indent="    ", subsequent_indent="    "))
