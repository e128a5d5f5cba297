"""`ragtrial datasets` and `ragtrial datasets download`, the latter against a real HTTP server on
127.0.0.1 serving a mirror laid out like the origins (the shared copies, copied into tmp_path and
zipped where the origin is an archive); the real hosts are never reached.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import socket
import threading
import warnings
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from conftest import SHARED_DATASETS

from ragtrial.cli import main
from ragtrial.data import load_dataset
from ragtrial.data.download import BASE_URL_ENV, DownloadError, download
from ragtrial.data.publications import (
    FOLDERS,
    FolderManifest,
    PublishedArchive,
    PublishedFile,
    PublishedFolder,
)


def _shared(folder: str) -> Path:
    where = SHARED_DATASETS / folder
    if not where.is_dir():
        pytest.skip(f"no shared copy of {folder}")
    return where


def _origin_path(mirror: Path, url: str) -> Path:
    path = mirror / unquote(urlsplit(url).path).lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def publish(manifest: FolderManifest, mirror: Path) -> None:
    """Lay the shared copy of `manifest` out in `mirror` as its origins publish it."""
    shared = _shared(manifest.name)
    for item in manifest.items:
        if isinstance(item, PublishedArchive):
            with zipfile.ZipFile(_origin_path(mirror, item.url), "w") as archive:
                for part in item.parts:
                    if isinstance(part, PublishedFolder):
                        for file in sorted((shared / part.path).rglob("*")):
                            name = f"{part.source}/{file.relative_to(shared / part.path).as_posix()}"
                            archive.write(file, name)
                    else:
                        archive.write(shared / part.path, part.source)
        elif isinstance(item, PublishedFolder):
            for name in item.names:
                shutil.copyfile(shared / item.path / name, _origin_path(mirror, f"{item.source}/{name}"))
        else:
            shutil.copyfile(shared / item.path, _origin_path(mirror, item.source))


class Mirror:
    """A static file server on 127.0.0.1 over `root`, recording the paths asked for."""

    def __init__(self, root: Path):
        self.root, self.requested = root, []
        requested = self.requested

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                requested.append(unquote(self.path))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def mirror(tmp_path):
    (tmp_path / "mirror").mkdir()
    server = Mirror(tmp_path / "mirror")
    yield server
    server.close()


def _no_leftovers(folder: Path) -> None:
    assert not [p for p in folder.rglob(".*")], "a temporary file or folder was left behind"


def _load(name: str, folder: Path, **options):
    with warnings.catch_warnings():  # the upstream quirks test_data.py checks
        warnings.simplefilter("ignore", UserWarning)
        return load_dataset(name, folder, **options)


@pytest.mark.parametrize(
    ("name", "loader", "options", "counts"),
    [
        ("gutenberg_christmas_carol", "text_folder", {}, (1, 0)),
        ("musique_sample_hipporag", "musique", {}, (1890, 100)),
        ("odsum", "odsum", {}, (232, 436)),  # a folder of 232 files fetched one by one
        ("graphrag_paper_podcast_msft", "graphrag_podcast", {}, (1669, 125)),  # unpacked from zips
        ("graphrag_paper_podcast_msft", "graphrag_podcast", {"subset": "msft_earnings"}, (41, 40)),
    ],
)
def test_a_download_is_the_folder_its_loader_reads(mirror, tmp_path, capsys, name, loader, options, counts):
    publish(FOLDERS[name], mirror.root)
    dest = tmp_path / "data" / name
    assert main(["datasets", "download", name, "--to", str(dest), "--base-url", mirror.url]) == 0
    ds = _load(loader, dest, **options)
    assert (len(ds.documents), len(ds.questions)) == counts
    out = capsys.readouterr().out
    assert f"in {dest}" in out and f"data.dataset: {loader}" in out and f"data.path: {dest}" in out
    _no_leftovers(dest)


def test_paths_with_spaces_and_files_without_a_loader(mirror, tmp_path):
    publish(FOLDERS["graphrag_examples"], mirror.root)
    dest = tmp_path / "graphrag_examples"
    assert (
        main(["datasets", "download", "graphrag_examples", "--to", str(dest), "--base-url", mirror.url]) == 0
    )
    assert any(" " in p for p in mirror.requested)  # "operation dulce" travelled quoted
    ds = _load("text_folder", dest / "operation_dulce" / "input", patterns=["dulce.txt"])
    assert [d.doc_id for d in ds.documents] == ["dulce.txt"]


def test_the_default_folder_is_in_the_data_root_and_a_verified_file_is_not_fetched_again(
    mirror, tmp_path, monkeypatch, capsys
):
    publish(FOLDERS["hotpotqa_sample_hipporag"], mirror.root)
    monkeypatch.setenv("RAGTRIAL_DATA_ROOT", str(tmp_path / "root"))
    monkeypatch.setenv(BASE_URL_ENV, mirror.url)  # the mirror named by the environment
    assert main(["datasets", "download", "hotpotqa"]) == 0
    dest = tmp_path / "root" / "hotpotqa_sample_hipporag"
    assert (
        _load("hotpotqa", dest).questions
        and "data.path: hotpotqa_sample_hipporag\n" in capsys.readouterr().out
    )
    (dest / "hotpotqa_train.json").unlink()
    mirror.requested.clear()
    assert main(["datasets", "download", "hotpotqa", "--force"]) == 0
    assert [Path(p).name for p in mirror.requested] == ["hotpotqa_train.json"]
    out = capsys.readouterr().out
    assert "kept hotpotqa_train_corpus.json" in out and "fetched hotpotqa_train.json" in out


def test_an_archive_is_checked_and_its_members_unpacked(mirror, tmp_path):
    # The shared copy is the published zip's members: a zip built from them is another file, so the
    # manifest is the real one without the zip's own hash; the members are checked against theirs.
    real = FOLDERS["multihop_rag"]
    archive = real.items[0]
    unhashed = dataclasses.replace(real, items=(dataclasses.replace(archive, size=None, sha256=None),))
    publish(unhashed, mirror.root)
    done = download(unhashed, tmp_path / "multihop_rag", mirror.url)
    assert [(d.path, d.action) for d in done] == [("corpus.json", "fetched"), ("MultiHopRAG.json", "fetched")]
    ds = _load("multihop_rag", tmp_path / "multihop_rag")
    assert (len(ds.documents), len(ds.questions)) == (609, 2556)
    with pytest.raises(
        DownloadError, match=r"data\.zip from http://127\.0\.0\.1:\d+/.* is not the published archive"
    ):
        download(real, tmp_path / "again", mirror.url)  # the real manifest knows the zip's hash
    _no_leftovers(tmp_path)


def test_a_missing_file_is_an_error_naming_its_url(mirror, tmp_path, capsys):
    dest = tmp_path / "carol"
    assert main(["datasets", "download", "text_folder", "--to", str(dest), "--base-url", mirror.url]) == 1
    err = capsys.readouterr().err
    assert (
        "HTTP 404" in err and f"{mirror.url}/gusye1234/nano-graphrag/" in err and "tests/mock_data.txt" in err
    )
    assert not [p for p in dest.rglob("*") if p.is_file()]


def test_a_file_that_is_not_the_published_one_is_removed(mirror, tmp_path, capsys):
    manifest = FOLDERS["gutenberg_christmas_carol"]
    publish(manifest, mirror.root)
    book = next(p for p in manifest.items if p.path == "a_christmas_carol_pg24022.txt")
    with _origin_path(mirror.root, book.source).open("ab") as f:
        f.write(b"!")
    dest = tmp_path / "carol"
    assert (
        main(
            ["datasets", "download", "gutenberg_christmas_carol", "--to", str(dest), "--base-url", mirror.url]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "a_christmas_carol_pg24022.txt from http://127.0.0.1" in err
    assert f"expected {book.size:,} bytes with sha256 {book.sha256}, got {book.size + 1:,} bytes" in err
    assert "it was removed" in err and not (dest / "a_christmas_carol_pg24022.txt").exists()
    _no_leftovers(dest)


def test_a_folder_that_does_not_match_its_digest_is_removed(mirror, tmp_path, capsys):
    manifest = FOLDERS["odsum"]
    publish(manifest, mirror.root)
    meetings = manifest.items[0]
    (_origin_path(mirror.root, f"{meetings.source}/Bdb001.txt")).write_text("another text")
    dest = tmp_path / "odsum"
    assert main(["datasets", "download", "odsum", "--to", str(dest), "--base-url", mirror.url]) == 1
    err = capsys.readouterr().err
    assert (
        "meeting/documents from http://127.0.0.1" in err and f"digest {meetings.digest}; got 232 files" in err
    )
    assert not (dest / "meeting" / "documents").exists()
    _no_leftovers(dest)


def test_an_unreachable_mirror(tmp_path, capsys):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dest = tmp_path / "carol"
    assert (
        main(
            [
                "datasets",
                "download",
                "text_folder",
                "--to",
                str(dest),
                "--base-url",
                f"http://127.0.0.1:{port}",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert f"http://127.0.0.1:{port}/gusye1234/nano-graphrag/" in err and "cannot fetch it" in err
    assert "refused" in err.lower()


def test_names_and_folders_the_command_refuses(tmp_path, capsys):
    assert main(["datasets", "download", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown data set or folder 'nope'; known:" in err and "musique, musique_sample_hipporag" in err
    assert main(["datasets", "download", "query_log"]) == 2
    assert "reads your own files" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep me")
    assert main(["datasets", "download", "text_folder", "--to", str(tmp_path / "full")]) == 2
    assert "exists and is not empty; run again with --force" in capsys.readouterr().err
    assert (tmp_path / "full" / "mine.txt").read_text() == "keep me"
    assert main(["datasets", "download", "natural_questions", "--to", str(tmp_path / "nq")]) == 1
    assert "storage.googleapis.com/natural_questions" in capsys.readouterr().err
    assert not (tmp_path / "nq").exists()
    argv = ["datasets", "download", "musique", "--to", str(tmp_path / "m"), "--base-url", "ftp://x"]
    assert main(argv) == 2
    assert "--base-url 'ftp://x': expected an http://, https:// or file:// URL" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_the_listing_names_each_loader_with_what_it_provides(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("RAGTRIAL_DATA_ROOT", str(tmp_path))
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    assert f"data root: {tmp_path}" in out
    block = out[out.index("\nmusique: ") :].split("\n\n")[0]
    assert "provides   questions, answers, gold passages, gold entities" in block
    assert "licence    CC BY 4.0 (MuSiQue)" in block and "Trivedi et al." in block
    assert "folder     musique_sample_hipporag (5.5 MB); absent: `ragtrial datasets download" in block
    assert "\ntext_folder: " in out and "documents only (no questions)" in out
    assert "\ngraphrag_examples: " in out  # a published folder no loader reads


@pytest.mark.fault
def test_an_oversized_file_or_a_zip_bomb_is_stopped_at_the_published_size(mirror, tmp_path):
    """A mirror serving 6 MiB for a file published as 1,000 bytes, and a 1,000-byte member unpacking
    to 24 MiB of zeros: each copy stops within 1% and one 1 MiB block of the published size, and
    nothing is left.
    """
    big = b"x" * (6 << 20)
    _origin_path(mirror.root, "https://example.org/files/big.txt").write_bytes(big)
    oversized = FolderManifest(
        "oversized",
        "test",
        items=(PublishedFile("big.txt", "https://example.org/files/big.txt", 1000, "0" * 64),),
    )
    with pytest.raises(DownloadError, match=r"more bytes than published") as err:
        download(oversized, tmp_path / "oversized", mirror.url)
    stopped = int(str(err.value).split("stopped after ")[1].split(" bytes")[0].replace(",", ""))
    assert stopped <= 1000 + 10 + (1 << 20)  # 1% and one block over the published 1,000 bytes

    with zipfile.ZipFile(
        _origin_path(mirror.root, "https://example.org/files/bomb.zip"), "w", zipfile.ZIP_DEFLATED
    ) as archive:
        archive.writestr("data/zeros.txt", b"\0" * (24 << 20))
    bomb = FolderManifest(
        "bomb",
        "test",
        items=(
            PublishedArchive(
                "https://example.org/files/bomb.zip",
                (PublishedFile("zeros.txt", "zeros.txt", 1000, "0" * 64),),
            ),
        ),
    )
    with pytest.raises(DownloadError, match=r"more bytes than published") as err:
        download(bomb, tmp_path / "bomb", mirror.url)
    stopped = int(str(err.value).split("stopped after ")[1].split(" bytes")[0].replace(",", ""))
    assert stopped <= 1000 + 10 + (1 << 20)
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and "mirror" not in p.parts]


@pytest.mark.fault
@pytest.mark.parametrize(
    "order", [("input/dirlink", "input/dirlink/x"), ("input/dirlink/x", "input/dirlink")]
)
def test_an_archive_whose_members_clash_as_file_and_folder_is_a_one_line_error(
    mirror, tmp_path, capsys, order
):
    with zipfile.ZipFile(_origin_path(mirror.root, "https://example.org/files/clash.zip"), "w") as archive:
        for name in order:
            archive.writestr(name, b"text")
    clash = FolderManifest(
        "clash",
        "test",
        items=(
            PublishedArchive(
                "https://example.org/files/clash.zip",
                (PublishedFolder("input", "input", 2, 8, "0" * 64),),
            ),
        ),
    )
    with pytest.raises(DownloadError, match="clashes with another member"):
        download(clash, tmp_path / "clash", mirror.url)
    _no_leftovers(tmp_path / "clash")
