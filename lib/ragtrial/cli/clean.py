"""`ragtrial clean [--outputs DIR] [--cache] [--indexes] [--yes] [--dry-run]`: remove the runs of the
outputs folder (each folder with a run.json, and `interactive/`, the runs opened by hand or by
`ragtrial query`), keeping the response cache and the saved indexes unless asked.

What goes is listed first and removed only after a yes (or `--yes`). A run folder whose lock a live
process holds (a run under way, `ragtrial.locks`) is refused, and so are the cache and the indexes
while any run or index build holds its lock. Links are never followed: a link in the outputs folder
is not removed and what it points at is never touched. Everything else (outputs/README.md, files and
folders the kit did not make) stays; the index page is rendered again for the runs that are left.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from ragtrial.config.base import ParamsError
from ragtrial.locks import FolderLock, LockHeld

CACHE_DIR = "cache"
INDEXES_DIR = "indexes"
INTERACTIVE_DIR = "interactive"


def add_parser(sub) -> None:
    clean = sub.add_parser(
        "clean",
        help="remove the runs of the outputs folder, keeping the cache and the indexes unless asked; lists "
        "what goes and asks first",
    )
    clean.add_argument("--outputs", help="outputs folder (default: <project>/outputs)")
    clean.add_argument("--cache", action="store_true", help=f"also remove the response cache ({CACHE_DIR}/)")
    clean.add_argument(
        "--indexes", action="store_true", help=f"also remove the saved indexes ({INDEXES_DIR}/)"
    )
    clean.add_argument("--yes", action="store_true", help="remove without asking")
    clean.add_argument("--dry-run", action="store_true", help="list what would be removed; remove nothing")
    clean.set_defaults(handler=clean_command)


@dataclass
class Plan:
    """What `clean` removes (each folder with the lock files it must hold while removing it), and
    what it refuses, with the reason.
    """

    remove: list[tuple[Path, list[Path]]] = field(default_factory=list)
    refused: list[tuple[Path, str]] = field(default_factory=list)


def _held(locks: list[Path]) -> str:
    """Why one of these lock files cannot be taken now ("" when every one is free)."""
    for lock in locks:
        if not lock.is_file():  # never taken, so free; asking would write one
            continue
        try:
            FolderLock(lock).acquire().release()
        except LockHeld as held:
            return str(held)
    return ""


def plan_clean(outputs: Path, cache: bool, indexes: bool) -> Plan:
    """The folders directly in `outputs` that go: the run folders (with run.json), `interactive/`,
    and on request the cache and the indexes; links are skipped, never followed.
    """
    from ragtrial.runner.checks import run_folder
    from ragtrial.runner.execute import LOCK_FILE

    plan = Plan()
    run_locks: list[Path] = []
    for entry in sorted(outputs.iterdir()) if outputs.is_dir() else []:
        if entry.is_symlink():
            if (entry / "run.json").exists() or entry.name in (CACHE_DIR, INDEXES_DIR, INTERACTIVE_DIR):
                plan.refused.append((entry, "a link: clean never follows links out of the outputs folder"))
            continue
        if entry.is_dir() and (entry / "run.json").is_file():
            run_dir = run_folder(outputs, entry.name)  # a real folder directly inside outputs
            lock = run_dir / LOCK_FILE
            if why := _held([lock]):
                plan.refused.append((run_dir, why))
            else:
                plan.remove.append((run_dir, [lock]))
            run_locks.append(lock)
        elif entry.is_dir() and entry.name == INTERACTIVE_DIR:
            plan.remove.append((entry, []))
    for wanted, name in ((cache, CACHE_DIR), (indexes, INDEXES_DIR)):
        folder = outputs / name
        if not wanted or folder.is_symlink() or not folder.is_dir():
            continue
        # an index build's lock sits beside its folder (`.<hash>.lock`); a run may write the cache
        locks = sorted(folder.glob(".*.lock")) if name == INDEXES_DIR else []
        if why := _held(run_locks + locks):
            plan.refused.append((folder, f"{why}, so its {name} stays"))
        else:
            plan.remove.append((folder, locks))
    return plan


def _size(folder: Path) -> str:
    total: float = sum(p.lstat().st_size for p in folder.rglob("*") if not p.is_symlink() and p.is_file())
    for unit in ("B", "kB", "MB", "GB"):
        if total < 1000 or unit == "GB":
            return f"{total:.0f} {unit}" if unit == "B" else f"{total:.1f} {unit}"
        total /= 1000
    return ""


def _confirmed(count: int) -> bool:
    try:
        answer = input(f"remove these {count} folder{'s' * (count != 1)}? [y/N] ")
    except EOFError:  # no terminal to ask
        print()
        return False
    return answer.strip().lower() in ("y", "yes")


def clean_command(args: argparse.Namespace) -> int:
    """Exit 0 when everything listed was removed (or, with --dry-run, listed); 1 when a folder was
    refused or the removal was not confirmed.
    """
    from ragtrial.config.paths import outputs_dir, project_root
    from ragtrial.report.index_page import render_index

    outputs = outputs_dir(project_root(), args.outputs)
    if not outputs.is_dir():
        raise ParamsError(f"--outputs {outputs}: no such folder")
    plan = plan_clean(outputs, args.cache, args.indexes)
    for folder, why in plan.refused:
        print(f"refused: {folder.name}/ ({why})", file=sys.stderr)
    if not plan.remove:
        print(f"nothing to remove in {outputs}")
        return 1 if plan.refused else 0
    verb = "would remove" if args.dry_run else "will remove"
    print(f"{verb} from {outputs}:")
    for folder, _ in plan.remove:
        print(f"  {folder.name}/  ({_size(folder)})")
    kept = [name for name in (CACHE_DIR, INDEXES_DIR) if (outputs / name).is_dir()]
    kept = [name for name in kept if outputs / name not in {f for f, _ in plan.remove}]
    if kept:
        print(f"keeping {', '.join(f'{name}/' for name in kept)} (--cache / --indexes remove them)")
    if args.dry_run:
        return 1 if plan.refused else 0
    if not args.yes and not _confirmed(len(plan.remove)):
        print("nothing removed")
        return 1
    removed = 0
    for folder, locks in plan.remove:
        try:
            with ExitStack() as held:  # no run starts in a folder while it is removed
                for lock in locks:
                    held.enter_context(FolderLock(lock))
                shutil.rmtree(folder)  # removes links inside, never what they point at
            removed += 1
        except LockHeld as taken:  # a run started since the list was made
            print(f"refused: {folder.name}/ ({taken})", file=sys.stderr)
            plan.refused.append((folder, str(taken)))
    if (outputs / "index.html").is_file():
        render_index(outputs)
    print(f"removed {removed} folder{'s' * (removed != 1)}")
    return 1 if plan.refused else 0
