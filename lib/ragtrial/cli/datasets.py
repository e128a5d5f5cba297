"""`ragtrial datasets`: every data set the kit loads, what it provides, where it was published, its
licence and its data-root folder; `ragtrial datasets download NAME [--to DIR] [--base-url URL]
[--force]`: fetch one from where it was published, verified, into the folder its loader reads.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import get_args

from ragtrial.config.base import ParamsError
from ragtrial.config.data import data_path_setting, data_root
from ragtrial.config.notebooks import Gold
from ragtrial.config.paths import project_root
from ragtrial.data import LOADERS
from ragtrial.data.download import BASE_URL_ENV, DownloadError, base_url_setting, download
from ragtrial.data.publications import FOLDERS, PUBLICATIONS, FolderManifest

_WIDTH = 100


def add_parser(sub) -> None:
    datasets = sub.add_parser(
        "datasets",
        help="the data sets: what each provides, where it was published, its licence; download one",
    )
    datasets.set_defaults(handler=list_command)
    actions = datasets.add_subparsers(dest="action", metavar="download")
    fetch = actions.add_parser(
        "download", help="fetch a data set from where it was published, verified, into the data root"
    )
    fetch.add_argument(
        "name", metavar="NAME", help="a data set or a data-root folder, as `ragtrial datasets` names them"
    )
    fetch.add_argument(
        "--to", metavar="DIR", help="the data set's folder (default: <data root>/<its folder>)"
    )
    fetch.add_argument(
        "--base-url",
        metavar="URL",
        help=f"a mirror laid out like the origins, whose URL replaces their scheme and host (default: "
        f"${BASE_URL_ENV}, else the origins)",
    )
    fetch.add_argument(
        "--force",
        action="store_true",
        help="fetch into a folder that is not empty: its files that verify are kept, the others fetched",
    )
    fetch.set_defaults(handler=download_command)


def _wrapped(label: str, text: str) -> str:
    return textwrap.fill(text, _WIDTH, initial_indent=f"    {label:<10} ", subsequent_indent=" " * 15)


def _size(manifest: FolderManifest) -> str:
    return f"{manifest.size / 1e6:.1f} MB" if manifest.items else "not fetched by the kit"


def _folder_line(name: str, root: Path) -> str:
    manifest = FOLDERS[name]
    where = root / name
    state = f"present at {where}" if where.is_dir() else f"absent: `ragtrial datasets download {name}`"
    return f"{name} ({_size(manifest)}); {state}"


def list_command(args: argparse.Namespace) -> int:
    """Each loader with what it provides, its publication, its licence and its folders (and whether
    they are in the data root), then the published folders no loader reads.
    """
    root = data_root(project_root())
    order = get_args(Gold)
    print(f"Data sets (data root: {root}):\n")
    for name in sorted(LOADERS):
        entry, publication = LOADERS.entry(name), PUBLICATIONS[name]
        provides = sorted(publication.provides, key=order.index)
        print(textwrap.fill(f"{name}: {entry.description}", _WIDTH, subsequent_indent="    "))
        print(_wrapped("provides", ", ".join(provides) or "documents only (no questions)"))
        print(_wrapped("published", publication.published_at))
        print(_wrapped("licence", publication.licence))
        folders = [_folder_line(folder, root) for folder in publication.folders]
        print(_wrapped("folder", "; ".join(folders) or "your own files (no published copy)"))
        print()
    read = {folder for publication in PUBLICATIONS.values() for folder in publication.folders}
    others = [manifest for name, manifest in FOLDERS.items() if name not in read]
    if others:
        print("Other published folders (no loader of their own):\n")
        for manifest in others:
            print(textwrap.fill(f"{manifest.name}: {manifest.description}", _WIDTH, subsequent_indent="    "))
            print(_wrapped("folder", _folder_line(manifest.name, root)))
            if manifest.note:
                print(_wrapped("use", manifest.note))
            print()
    return 0


def resolve(name: str) -> tuple[FolderManifest, list[str]]:
    """The manifest `name` means (a folder of `FOLDERS`, or a data set with one folder) and the
    data sets that read that folder.
    """
    if name in FOLDERS:
        folder = name
    elif name in PUBLICATIONS:
        folders = PUBLICATIONS[name].folders
        if not folders:
            raise ParamsError(
                f"data set {name!r} reads your own files: there is no published copy to download"
            )
        folder = folders[0]
    else:
        known = sorted({*FOLDERS, *(n for n, p in PUBLICATIONS.items() if p.folders)})
        raise ParamsError(f"unknown data set or folder {name!r}; known: {', '.join(known)}")
    readers = [loader for loader, publication in PUBLICATIONS.items() if folder in publication.folders]
    return FOLDERS[folder], readers


def download_command(args: argparse.Namespace) -> int:
    """Exit 0 when every file is in place and verified, 1 when a fetch failed or the kit cannot fetch
    the data set (what to do instead is printed), 2 on a usage problem (unknown name, a folder that
    is not empty without --force).
    """
    manifest, readers = resolve(args.name)
    base_url = base_url_setting(args.base_url)
    root = project_root()
    target = Path(args.to).expanduser().resolve() if args.to else data_root(root) / manifest.name
    if manifest.instead:
        print(f"error: {manifest.name} is not fetched by the kit: {manifest.instead}", file=sys.stderr)
        return 1
    if target.exists() and not target.is_dir():
        raise ParamsError(f"{target} is not a folder")
    if target.is_dir() and any(target.iterdir()) and not args.force:
        raise ParamsError(
            f"{target} exists and is not empty; run again with --force to fetch into it (its files that "
            "verify are kept, the others fetched)"
        )
    print(f"{manifest.name}: {manifest.description}")
    try:
        done = download(manifest, target, base_url, log=lambda line: print(f"  {line}"))
    except DownloadError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    fetched = sum(1 for d in done if d.action == "fetched")
    print(f"{manifest.name}: {fetched} fetched, {len(done) - fetched} kept, all verified, in {target}")
    if readers:
        print("Settings to read it:")
        for loader in readers:
            print(f"  data.dataset: {loader}\n  data.path: {data_path_setting(target, root)}")
    if manifest.note:
        print(textwrap.fill(f"Note: {manifest.note}", _WIDTH))
    return 0
