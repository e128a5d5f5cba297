"""`ragtrial cache export --to FILE|URL [--from URL] [BATCH]` and `ragtrial cache import FILE|URL
[--to URL] [BATCH]`: copy response-cache rows between a SQLite file and a PostgreSQL database.

One side is the project's cache unless named: the `cache.url` of BATCH's runs, else the default
(`outputs/cache/ragtrial.sqlite`, under `--outputs` when given). Export ships it (a finished
study's cache beside its results, or into a shared database); import takes rows in. A row whose
key the target holds is skipped, so copying again adds nothing. A FILE is a SQLite cache file
(relative to the working directory); a URL is read as `cache.url` is (`sqlite:///outputs/...` under
the outputs folder).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ragtrial.config.base import ParamsError
from ragtrial.config.batch import load_batch
from ragtrial.config.cache import CacheSettings, url_problem
from ragtrial.config.paths import batch_file, project_root
from ragtrial.redact import redact_url

TARGET_HELP = "a SQLite file (created when absent) or a cache URL (sqlite:///..., postgresql://...)"


def add_parser(sub) -> None:
    cache = sub.add_parser(
        "cache",
        help="copy response-cache rows between a SQLite file and a PostgreSQL database (export, import)",
    )
    actions = cache.add_subparsers(dest="action", required=True)
    export = actions.add_parser(
        "export", help="copy the project's cache (or --from) into a file or database; skips keys it holds"
    )
    export.add_argument("--to", dest="target", required=True, metavar="FILE|URL", help=TARGET_HELP)
    export.add_argument("--from", dest="source", metavar="FILE|URL", help="default: the project's cache")
    import_ = actions.add_parser(
        "import",
        help="copy a file's or database's rows into the project's cache (or --to); skips keys it holds",
    )
    import_.add_argument("source", metavar="FILE|URL", help="the SQLite file or cache URL to read")
    import_.add_argument("--to", dest="target", metavar="FILE|URL", help="default: the project's cache")
    for action in (export, import_):
        action.add_argument(
            "batch",
            nargs="?",
            help="params/<batch>.yaml whose cache.url is the project's cache (default: the default cache)",
        )
        action.add_argument(
            "--outputs", help="outputs folder of the project's cache (default: <project root>/outputs)"
        )
        action.set_defaults(handler=copy_command)


def project_cache(batch: str | None, root: Path) -> CacheSettings:
    """The cache the runs of `batch` share (the default without a batch)."""
    if batch is None:
        return CacheSettings()
    path = batch_file(batch, root)
    specs, _ = load_batch(path)
    caches = {(s.settings.cache.url, s.settings.cache.password_env): s.settings.cache for s in specs}
    if len(caches) != 1:
        urls = ", ".join(sorted({url for url, _ in caches})) or "none (no run)"
        raise ParamsError(f"{path}: its runs use the caches {urls}: name one with --from / --to")
    return next(iter(caches.values()))


def named_cache(value: str, project: CacheSettings) -> CacheSettings:
    """A cache given on the command line: a URL as `cache.url` takes it, or a SQLite file path
    (relative to the working directory); the password variable is the project cache's.
    """
    if "://" not in value:
        value = "sqlite:///" + str(Path(value).expanduser().resolve())
    problem = url_problem(value)
    if problem:
        raise ParamsError(problem)
    return CacheSettings(url=value, password_env=project.password_env)


def copy_command(args: argparse.Namespace) -> int:
    """Copy the rows; one line per table, rows copied and skipped."""
    from ragtrial.llm.cache import CacheError, ResponseCache, cache_location, copy_rows

    root = project_root()
    project = project_cache(args.batch, root)
    source, target = (named_cache(v, project) if v else project for v in (args.source, args.target))
    source_at, target_at = (cache_location(c, root, args.outputs) for c in (source, target))
    if str(source_at) == str(target_at):
        raise ParamsError(f"the source and the target are the same cache: {redact_url(str(source_at))}")
    if isinstance(source_at, Path) and not source_at.is_file():
        raise ParamsError(f"no cache file {source_at} to copy from")
    try:
        source_cache = ResponseCache(source_at, source.password_env)
        target_cache = ResponseCache(target_at, target.password_env)
        print(f"{source_cache.where} -> {target_cache.where}")
        for table, (copied, skipped) in copy_rows(source_cache, target_cache).items():
            print(f"{table}: {copied:,} copied, {skipped:,} skipped (the target held their keys)")
    except CacheError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    source_cache.close()
    target_cache.close()
    return 0
