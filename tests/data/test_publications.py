"""Each loader's publication record (what it provides, where it was published, its licence, its
folders) and the download manifests, checked against the shared copies of the data sets.
"""

from __future__ import annotations

import warnings
from typing import get_args

import pytest
from conftest import SHARED_DATASETS

from ragtrial.config.notebooks import Gold
from ragtrial.data import LOADERS, load_dataset
from ragtrial.data.download import file_sha256, folder_digest
from ragtrial.data.gold import gold_carried
from ragtrial.data.publications import FOLDERS, PUBLICATIONS, PublishedFolder, published_parts


def test_every_loader_carries_its_publication_as_metadata():
    assert set(PUBLICATIONS) == set(LOADERS)
    for name in LOADERS:
        metadata = LOADERS.entry(name).metadata
        assert metadata == vars(PUBLICATIONS[name]), name
        assert set(metadata["provides"]) <= set(get_args(Gold)), name
        assert metadata["published_at"] and metadata["licence"], name
        assert all(folder in FOLDERS for folder in metadata["folders"]), name


def test_every_folder_is_fetched_or_says_what_to_do_instead():
    for manifest in FOLDERS.values():
        assert bool(manifest.items) != bool(manifest.instead), manifest.name
        assert manifest.description, manifest.name


@pytest.mark.parametrize("name", [n for n, p in PUBLICATIONS.items() if p.folders])
def test_what_a_loader_provides_is_what_its_shared_data_carries(name):
    folder = SHARED_DATASETS / PUBLICATIONS[name].folders[0]
    if not folder.is_dir():
        pytest.skip(f"no shared copy of {name} ({folder})")
    with warnings.catch_warnings():  # the upstream quirks test_data.py checks
        warnings.simplefilter("ignore", UserWarning)
        sample = load_dataset(name, folder, limit_questions=20, limit_documents=20)
    assert gold_carried(sample) == set(PUBLICATIONS[name].provides)


@pytest.mark.parametrize("folder", [n for n, m in FOLDERS.items() if m.items])
def test_a_manifest_lists_every_file_of_the_shared_copy_with_its_size_and_hash(folder):
    where = SHARED_DATASETS / folder
    if not where.is_dir():
        pytest.skip(f"no shared copy of {folder}")
    listed = set()
    for part in published_parts(FOLDERS[folder]):
        path = where / part.path
        if isinstance(part, PublishedFolder):
            assert folder_digest(path, part.path) == (part.files, part.size, part.digest), part.path
            assert not part.names or sorted(part.names) == sorted(p.name for p in path.iterdir()), part.path
            listed |= {p for p in path.rglob("*") if p.is_file()}
        else:
            assert (path.stat().st_size, file_sha256(path)) == (part.size, part.sha256), part.path
            listed.add(path)
    shared = {p for p in where.rglob("*") if p.is_file() and p.name != "SOURCE.md"}  # the kit's own notes
    assert shared == listed
