"""`ragtrial --version`: the package's version and the commit of the kit checkout it runs from."""

from __future__ import annotations

import argparse


def version_line() -> str:
    """E.g. `ragtrial 0.1.0 (commit 3f2a…+dirty)`; "+dirty" when tracked files differ from the commit."""
    from ragtrial import __version__
    from ragtrial.config.paths import kit_checkout
    from ragtrial.runner.context import git_commit

    checkout = kit_checkout()
    where = f"commit {git_commit(checkout)}" if checkout else "not installed from a checkout"
    return f"ragtrial {__version__} ({where})"


class VersionAction(argparse.Action):
    """`--version`: print `version_line()` and exit 0 (the commit is asked of git only then)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()
