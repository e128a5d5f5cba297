"""Fetching a published data set into the folder its loader reads (`ragtrial datasets download`).

`download(manifest, target)` fetches every item of a `publications.FolderManifest` from its origin
(or from a mirror laid out like the origins: `base_url`, else $RAGTRIAL_DOWNLOAD_BASE_URL, replaces
each URL's scheme and host), unpacks archives, and checks every file against the manifest (size and
sha256; a folder of many files by its count, bytes and digest). A file is written to a hidden
temporary file beside its destination and renamed into place only once it verifies, a folder
likewise as a whole, so a failure or an interruption leaves nothing half-written and a file that
does not verify is removed, its error naming the file, the URL and what was expected and found.
What is already there and verifies is kept, not fetched again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO
from urllib.parse import quote, unquote, urlsplit

from ragtrial import __version__
from ragtrial.config.base import ParamsError
from ragtrial.data.publications import (
    FolderManifest,
    PublishedArchive,
    PublishedFile,
    PublishedFolder,
)
from ragtrial.redact import redact_url

BASE_URL_ENV = "RAGTRIAL_DOWNLOAD_BASE_URL"
TIMEOUT_S = 60.0  # per connection attempt and per read: a stalled server fails, a slow one does not
_SCHEMES = ("http://", "https://", "file://")
_BLOCK = 1 << 20
# A copy may pass the published size by 1% and one block before it is stopped: within that, the
# check after the copy says what arrived (size and digest); beyond it, nothing more is written.
SIZE_MARGIN = 0.01


def byte_cap(published: int) -> int:
    """The most bytes a copy of a `published`-byte file (or folder) may write."""
    return published + int(published * SIZE_MARGIN) + _BLOCK


class DownloadError(Exception):
    """A file could not be fetched, or what arrived is not what was published; the message names it."""


@dataclass(frozen=True)
class Fetched:
    """One file or folder of the manifest: where it is in the data set's folder, whether it was
    fetched now or kept (it was there and verified), and its bytes.
    """

    path: str
    action: str
    size: int


def base_url_setting(given: str | None) -> str | None:
    """The mirror to fetch from: `given`, else $RAGTRIAL_DOWNLOAD_BASE_URL, else None (the origins)."""
    value = (given or os.environ.get(BASE_URL_ENV, "")).strip()
    if value and not value.startswith(_SCHEMES):
        origin = "--base-url" if given else f"${BASE_URL_ENV}"
        raise ParamsError(f"{origin} {redact_url(value)!r}: expected an http://, https:// or file:// URL")
    return value or None


def mirrored(url: str, base_url: str | None) -> str:
    """`url` with its scheme and host replaced by `base_url` (whose own path, if any, comes first)."""
    if not base_url:
        return url
    parts = urlsplit(url)
    return base_url.rstrip("/") + parts.path + (f"?{parts.query}" if parts.query else "")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def folder_digest(folder: Path, prefix: str) -> tuple[int, int, str]:
    """(files, bytes, digest) of every file under `folder`, each named `<prefix>/<path under folder>`
    in the digest: sha256 over, in sorted name order, name + NUL + the file's raw sha256 digest.
    """
    named = sorted(
        (f"{prefix}/{p.relative_to(folder).as_posix()}", p) for p in folder.rglob("*") if p.is_file()
    )
    digest = hashlib.sha256()
    for name, path in named:
        digest.update(name.encode() + b"\0" + bytes.fromhex(file_sha256(path)))
    return len(named), sum(p.stat().st_size for _, p in named), digest.hexdigest()


def download(
    manifest: FolderManifest,
    target: Path,
    base_url: str | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> list[Fetched]:
    """Fetch `manifest` into folder `target` (created), each file checked; `log` gets a line per
    file or folder kept or fetched. Raises `DownloadError` at the first failure (what verified
    before it stays in place).
    """
    if manifest.instead:
        raise DownloadError(f"{manifest.name} is not fetched by the kit: {manifest.instead}")
    target.mkdir(parents=True, exist_ok=True)
    done: list[Fetched] = []
    for item in manifest.items:
        if isinstance(item, PublishedArchive):
            done += _archive(item, target, base_url, log)
        elif isinstance(item, PublishedFolder):
            done.append(_kept(item, target, log) or _fetched_folder(item, target, base_url, log))
        else:
            done.append(_kept(item, target, log) or _fetched_file(item, target, base_url, log))
    return done


def _verified(part: PublishedFile | PublishedFolder, target: Path) -> bool:
    where = target / part.path
    if isinstance(part, PublishedFolder):
        return where.is_dir() and folder_digest(where, part.path) == (part.files, part.size, part.digest)
    return where.is_file() and where.stat().st_size == part.size and file_sha256(where) == part.sha256


def _kept(part: PublishedFile | PublishedFolder, target: Path, log: Callable[[str], None]) -> Fetched | None:
    if not _verified(part, target):
        return None
    log(f"kept {part.path} (already there, verified)")
    return Fetched(part.path, "kept", part.size)


@contextmanager
def _opened(url: str) -> Iterator[BinaryIO]:
    request = urllib.request.Request(url, headers={"User-Agent": f"ragtrial/{__version__}"})
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)  # the schemes are checked
    except urllib.error.HTTPError as err:
        raise DownloadError(f"{redact_url(url)}: HTTP {err.code} {err.reason}") from None
    except urllib.error.URLError as err:
        raise DownloadError(f"{redact_url(url)}: cannot fetch it ({err.reason})") from None
    except OSError as err:  # a timeout while connecting, a reset connection
        raise DownloadError(f"{redact_url(url)}: cannot fetch it ({err})") from None
    with response:
        yield response


def _copy(source: IO[bytes], out: IO[bytes], url: str, limit: int) -> tuple[int, str]:
    """Copy `source` into `out`; (bytes, sha256) of what was copied. A copy that would pass `limit`
    bytes (`byte_cap` of what the manifest publishes) stops there: a hostile mirror or a zip bomb
    cannot fill the disk before the check after the copy would refuse it.
    """
    digest, size = hashlib.sha256(), 0
    try:
        while block := source.read(_BLOCK):
            if size + len(block) > limit:
                raise DownloadError(
                    f"{redact_url(url)}: more bytes than published (at most {limit:,} with the "
                    f"{SIZE_MARGIN:.0%} margin); stopped after {size:,} bytes and removed what was written"
                )
            out.write(block)
            digest.update(block)
            size += len(block)
    except OSError as err:  # the connection broke or stalled mid-file
        raise DownloadError(f"{redact_url(url)}: the transfer broke after {size:,} bytes ({err})") from None
    return size, digest.hexdigest()


def _facts(size: int | None, sha256: str | None) -> str:
    """What is known of a file: "N bytes with sha256 H" (either part left out when unknown)."""
    known = [f"{size:,} bytes" if size is not None else "", f"sha256 {sha256}" if sha256 else ""]
    return " with ".join(fact for fact in known if fact)


def _check(path: str, url: str, size: int, sha256: str, expected: PublishedFile) -> None:
    if (size, sha256) != (expected.size, expected.sha256):
        raise DownloadError(
            f"{path} from {redact_url(url)} is not the published file: expected "
            f"{_facts(expected.size, expected.sha256)}, got {_facts(size, sha256)}; it was removed"
        )


@contextmanager
def _temporary_file(dest: Path) -> Iterator[Path]:
    """A hidden file beside `dest` (so the rename is atomic), removed unless it was renamed."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    os.close(handle)
    try:
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)


@contextmanager
def _temporary_folder(dest: Path) -> Iterator[Path]:
    """A hidden folder beside `dest`, removed unless it was renamed."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _replace_folder(built: Path, dest: Path) -> None:
    """Put the verified folder `built` at `dest`; a folder there (one that did not verify) goes."""
    if dest.exists():
        old = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".old"))
        dest.rename(old / dest.name)
        built.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        built.rename(dest)


def _check_folder(built: Path, spec: PublishedFolder, source: str) -> None:
    files, size, digest = folder_digest(built, spec.path)
    if (files, size, digest) != (spec.files, spec.size, spec.digest):
        raise DownloadError(
            f"{spec.path} from {redact_url(source)} is not the published folder: expected "
            f"{spec.files:,} files, {spec.size:,} bytes, digest {spec.digest}; got {files:,} files, "
            f"{size:,} bytes, digest {digest}; it was removed"
        )


def _fetched_file(
    spec: PublishedFile, target: Path, base_url: str | None, log: Callable[[str], None]
) -> Fetched:
    url = mirrored(spec.source, base_url)
    dest = target / spec.path
    with _temporary_file(dest) as part:
        with _opened(url) as response, part.open("wb") as out:
            size, sha256 = _copy(response, out, url, byte_cap(spec.size))
        _check(spec.path, url, size, sha256, spec)
        part.replace(dest)
    log(f"fetched {spec.path} ({size:,} bytes)")
    return Fetched(spec.path, "fetched", size)


def _fetched_folder(
    spec: PublishedFolder, target: Path, base_url: str | None, log: Callable[[str], None]
) -> Fetched:
    dest = target / spec.path
    with _temporary_folder(dest) as built:
        written = 0
        for name in spec.names:
            url = mirrored(f"{spec.source}/{quote(name)}", base_url)
            with _opened(url) as response, (built / name).open("wb") as out:
                written += _copy(response, out, url, byte_cap(spec.size) - written)[0]
        _check_folder(built, spec, mirrored(spec.source, base_url))
        _replace_folder(built, dest)
    log(f"fetched {spec.path}/ ({spec.files:,} files, {spec.size:,} bytes)")
    return Fetched(spec.path, "fetched", spec.size)


def _archive(
    spec: PublishedArchive, target: Path, base_url: str | None, log: Callable[[str], None]
) -> list[Fetched]:
    kept = [_kept(part, target, log) for part in spec.parts]
    missing = [part for part, done in zip(spec.parts, kept, strict=True) if done is None]
    if not missing:
        return [done for done in kept if done is not None]
    url = mirrored(spec.url, base_url)
    name = unquote(PurePosixPath(urlsplit(spec.url).path).name)
    with _temporary_file(target / name) as archive:
        with _opened(url) as response, archive.open("wb") as out:
            # a zip is at most its members' bytes (stored) plus headers, whatever its published size
            published = max(spec.size or 0, sum(part.size for part in spec.parts))
            size, sha256 = _copy(response, out, url, byte_cap(published))
        found = (size if spec.size is not None else None, sha256 if spec.sha256 else None)
        if found != (spec.size, spec.sha256):
            raise DownloadError(
                f"{name} from {redact_url(url)} is not the published archive: expected "
                f"{_facts(spec.size, spec.sha256)}, got {_facts(*found)}; it was removed"
            )
        log(f"fetched {name} ({size:,} bytes)")
        try:
            with zipfile.ZipFile(archive) as members:
                for part in missing:
                    _unpack(members, part, target, url)
                    log(f"unpacked {part.path}{'/' if isinstance(part, PublishedFolder) else ''}")
        except zipfile.BadZipFile as err:
            raise DownloadError(f"{name} from {redact_url(url)} is not a zip archive ({err})") from None
    return [
        done or Fetched(part.path, "fetched", part.size) for part, done in zip(spec.parts, kept, strict=True)
    ]


def _member_path(member: str, folder: str) -> PurePosixPath | None:
    """The path of archive member `member` under its folder named `folder` (at any depth), or None."""
    parts, wanted = PurePosixPath(member).parts, PurePosixPath(folder).parts
    if not parts or parts[0] == "__MACOSX":  # macOS's resource forks, not data
        return None
    for i in range(len(parts) - len(wanted)):
        if parts[i : i + len(wanted)] == wanted:
            return PurePosixPath(*parts[i + len(wanted) :])
    return None


def _unpack(members: zipfile.ZipFile, part: PublishedFile | PublishedFolder, target: Path, url: str) -> None:
    files = [info for info in members.infolist() if not info.is_dir()]
    dest = target / part.path
    if isinstance(part, PublishedFile):
        found = [i for i in files if i.filename == part.source or i.filename.endswith(f"/{part.source}")]
        if len(found) != 1:
            raise DownloadError(f"{redact_url(url)}: {len(found)} members named {part.source}, expected one")
        with _temporary_file(dest) as unpacked:
            with members.open(found[0]) as source, unpacked.open("wb") as out:
                size, sha256 = _copy(source, out, url, byte_cap(part.size))
            _check(part.path, url, size, sha256, part)
            unpacked.replace(dest)
        return
    with _temporary_folder(dest) as built:
        written = 0
        for info in files:
            inner = _member_path(info.filename, part.source)
            if inner is None:
                continue
            if ".." in inner.parts:  # a member must not write outside its folder
                raise DownloadError(f"{redact_url(url)}: member {info.filename!r} points outside its folder")
            out_path = built.joinpath(*inner.parts)
            try:
                out_path.parent.mkdir(parents=True, exist_ok=True)
                with members.open(info) as source, out_path.open("wb") as out:
                    written += _copy(source, out, url, byte_cap(part.size) - written)[0]
            except (FileExistsError, NotADirectoryError, IsADirectoryError):
                # one member a file, another below it as if it were a folder (`a` and `a/x`)
                raise DownloadError(
                    f"{redact_url(url)}: member {info.filename!r} clashes with another member "
                    "(a file and a folder of one name)"
                ) from None
        _check_folder(built, part, f"{url} (members under {part.source}/)")
        _replace_folder(built, dest)
