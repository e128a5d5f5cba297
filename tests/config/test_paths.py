"""The project root, notebooks, outputs folder and settings paths (`config.paths`)."""

from pathlib import Path

import pytest

from ragtrial.config import paths
from ragtrial.config.data import data_path

KIT = Path(__file__).resolve().parents[2]


def test_the_kit_checkout_is_found_from_the_package():
    assert paths.kit_checkout() == KIT


def test_the_root_is_the_nearest_folder_with_notebooks_or_an_init_batch(tmp_path, monkeypatch):
    workspace = tmp_path / "study"
    (workspace / "deep" / "er").mkdir(parents=True)
    (workspace / paths.WORKSPACE_FILE).write_text("runs: []\n")
    assert paths.project_root(workspace / "deep" / "er") == workspace
    monkeypatch.chdir(workspace / "deep")
    assert paths.project_root() == workspace
    assert paths.project_root(KIT / "lib" / "ragtrial") == KIT


def test_outside_any_project_the_root_is_the_kit_checkout(tmp_path):
    assert paths.project_root(tmp_path) == KIT


def test_an_init_folder_runs_the_kits_notebooks(tmp_path):
    (tmp_path / paths.WORKSPACE_FILE).write_text("runs: []\n")
    assert paths.notebooks_dir(tmp_path) == KIT / "notebooks"
    assert paths.notebooks_dir(KIT) == KIT / "notebooks"


def test_a_batch_file_is_read_from_the_working_directory_else_the_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert paths.batch_file("params/default.yaml", KIT) == KIT / "params" / "default.yaml"
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "default.yaml").write_text("runs: []\n")
    assert paths.batch_file("params/default.yaml", KIT) == Path("params/default.yaml")
    # neither: as typed, so the error names what the user wrote
    assert paths.batch_file("params/absent.yaml", KIT) == Path("params/absent.yaml")


def test_outputs_paths_follow_the_outputs_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(paths.OUTPUTS_ENV, raising=False)
    root = tmp_path / "root"
    assert paths.output_path("outputs/cache/c.sqlite", root) == root / "outputs" / "cache" / "c.sqlite"
    assert paths.output_path("answers/a.jsonl", root) == root / "answers" / "a.jsonl"
    assert paths.output_path(tmp_path / "abs.sqlite", root) == tmp_path / "abs.sqlite"
    moved = tmp_path / "elsewhere"
    assert paths.output_path("outputs/indexes", root, moved) == moved / "indexes"
    monkeypatch.setenv(paths.OUTPUTS_ENV, str(moved))
    assert paths.output_path("outputs/indexes", root) == moved / "indexes"
    assert paths.output_path("outputs", root) == moved
    # only a leading `outputs` part moves: a folder merely named so elsewhere stays
    assert paths.output_path("data/outputs/x", root) == root / "data" / "outputs" / "x"
    assert paths.outputs_dir(root) == (root / "outputs").resolve()
    monkeypatch.chdir(tmp_path)
    assert paths.outputs_dir(root, "mine") == tmp_path / "mine"


def test_data_paths_are_under_the_roots_data_folder_from_anywhere_inside_it(tmp_path, monkeypatch):
    monkeypatch.delenv("RAGTRIAL_DATA_ROOT", raising=False)
    (tmp_path / paths.WORKSPACE_FILE).write_text("runs: []\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert data_path("musique") == tmp_path / "data" / "musique"


def test_without_a_checkout_or_project_the_error_says_where_to_run(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "kit_checkout", lambda: None)
    with pytest.raises(paths.ParamsError, match="ragtrial init"):
        paths.project_root(tmp_path)
