"""`ragtrial systems list | install NAME... [--force]`."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    systems = sub.add_parser(
        "systems", help="the upstream systems on trial (GraphRAG, LightRAG, fast-graphrag): list, install"
    )
    systems.add_argument("action", choices=["list", "install"])
    systems.add_argument("names", nargs="*", metavar="NAME", help="systems to install, or all")
    systems.add_argument("--force", action="store_true", help="re-create the environment")
    systems.set_defaults(handler=systems_command)


def systems_command(args: argparse.Namespace) -> int:
    """`ragtrial systems list | install NAME...`: the upstream systems and their environments."""
    from ragtrial.methods.upstream.environments import (
        SYSTEMS,
        SystemNotInstalled,
        environment_folder,
        install,
        is_installed,
    )

    if args.action == "list":
        for name in SYSTEMS:
            spec, entry = SYSTEMS.get(name), SYSTEMS.entry(name)
            where = environment_folder(name) if spec.isolated else "the kit's own environment"
            state = "installed" if is_installed(name) else "not installed"
            print(f"{name:14} {state:14} {where}\n{'':14} {entry.description}")
        return 0
    names = list(SYSTEMS) if args.names == ["all"] else args.names
    unknown = SYSTEMS.unknown(names)
    if unknown or not names:
        print(f"error: name the systems to install ({', '.join(SYSTEMS)} or all)", file=sys.stderr)
        return 2
    for name in names:
        try:
            print(f"{name}: {install(name, force=args.force)}")
        except SystemNotInstalled as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
    return 0
