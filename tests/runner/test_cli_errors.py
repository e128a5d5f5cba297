"""Bad command-line input and bad batch files: one line on stderr naming what is wrong, a non-zero
exit, nothing executed; notebook names and run folders that would leave their folders are refused.
"""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import PROJECT_ROOT

from ragtrial.cli import main
from ragtrial.config.batch import RunSpec, load_batch
from ragtrial.config.settings import validate_settings

pytestmark = pytest.mark.fault


def write_batch(tmp_path, runs, **extra) -> str:
    path = tmp_path / "batch.yaml"
    path.write_text(
        yaml.safe_dump(
            {"settings": {"cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"}}, "runs": runs, **extra}
        )
    )
    return str(path)


def run_cli(capsys, *args: str) -> tuple[int, list[str]]:
    code = main(["run", *args])
    return code, capsys.readouterr().err.splitlines()


@pytest.fixture
def in_project(monkeypatch):
    monkeypatch.chdir(PROJECT_ROOT)


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--set", "llm.model=[unclosed"], "--set 'llm.model=[unclosed'"),
        (["--set", "qa.k={a"], "--set 'qa.k={a'"),
        (["--workers", "-2"], "--workers -2"),
        (["--workers", "0"], "--workers 0"),
        (["--only", "99_nope"], "--only 99_nope"),
        (["--engine", "ray", "--workers", "2"], "--workers 2"),  # the cluster's resources say how many
        (["--address", "auto"], "--address auto"),  # a Ray cluster's, without --engine ray
    ],
)
def test_bad_options_fail_in_one_line(capsys, tmp_path, in_project, args, names):
    batch = write_batch(tmp_path, [{"notebook": "00_backend_check"}])
    code, err = run_cli(capsys, batch, "--outputs", str(tmp_path / "out"), *args)
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and names in err[0], err
    assert not (tmp_path / "out").exists()  # nothing ran


def test_the_ray_engine_refuses_a_url_with_credentials_naming_the_key_not_the_secret(
    capsys, tmp_path, in_project
):
    url = "http://user:s3cret-pass@127.0.0.1:9/v1"
    batch = write_batch(tmp_path, [{"notebook": "00_backend_check"}])
    code, err = run_cli(
        capsys,
        batch,
        "--engine",
        "ray",
        "--set",
        "llm.backend=openai_compatible",
        "--set",
        f"llm.base_url={url}",
    )
    assert code == 2 and len(err) == 1 and "key 'llm.base_url'" in err[0] and "object store" in err[0], err
    assert "s3cret" not in err[0]


def test_the_ray_engine_takes_a_url_with_a_user_name_only(tmp_path):
    from ragtrial.runner.ray_engine import refuse_url_passwords

    batch = write_batch(tmp_path, [{"notebook": "00_backend_check"}])
    specs, _ = load_batch(batch, {"cache": {"url": "postgresql://ragtrial@127.0.0.1:5432/study"}})
    refuse_url_passwords(specs)  # the password, if any, is in cache.password_env


def test_a_binary_batch_file_fails_in_one_line(capsys, tmp_path, in_project):
    batch = tmp_path / "batch.yaml"
    batch.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe binary")
    code, err = run_cli(capsys, str(batch), "--outputs", str(tmp_path / "out"))
    assert code == 2 and len(err) == 1 and str(batch) in err[0] and "UTF-8" in err[0], err


def test_invalid_yaml_fails_in_one_line_with_its_place(capsys, tmp_path, in_project):
    batch = tmp_path / "batch.yaml"
    batch.write_text("runs:\n  - notebook: 00_backend_check\n  - {notebook: [\n")
    code, err = run_cli(capsys, str(batch), "--outputs", str(tmp_path / "out"))
    assert code == 2 and len(err) == 1 and str(batch) in err[0] and "line" in err[0], err


@pytest.mark.parametrize(
    ("runs", "names"),
    [
        ([], "key 'runs'"),
        ([{"notebook": "00_backend_check", "grid": {"llm.seed": []}}], "llm.seed"),
    ],
)
def test_a_batch_that_runs_nothing_is_an_error(capsys, tmp_path, in_project, runs, names):
    batch = write_batch(tmp_path, runs)
    code, err = run_cli(capsys, batch, "--outputs", str(tmp_path / "out"))
    assert code == 2 and len(err) == 1 and batch in err[0] and names in err[0], err


EMPTY_NOTEBOOK = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.parametrize("escape", ["relative", "absolute"])
def test_notebook_names_that_leave_the_notebooks_folder_are_refused(capsys, tmp_path, monkeypatch, escape):
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    (root / "notebooks").mkdir(parents=True)
    (root / "notebooks" / "fine.ipynb").write_text(json.dumps(EMPTY_NOTEBOOK))
    elsewhere.mkdir()
    (elsewhere / "nb.ipynb").write_text(json.dumps(EMPTY_NOTEBOOK))  # a notebook the name reaches
    name = "../../elsewhere/nb" if escape == "relative" else str(elsewhere / "nb")
    batch = write_batch(tmp_path, [{"notebook": "fine"}, {"notebook": name}])
    # Where the escaped run folder would be (outputs/<name>-<hash>), with a file of someone else's.
    settings = validate_settings({"cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"}}, "test")
    planted = elsewhere / f"{RunSpec(notebook='nb', settings=settings).run_id}" / "planted.txt"
    planted.parent.mkdir()
    planted.write_text("keep me")
    monkeypatch.chdir(root)
    code, err = run_cli(capsys, batch, "--force")
    assert code == 2 and len(err) == 1 and batch in err[0] and "runs.1.notebook" in err[0], err
    assert planted.read_text() == "keep me" and not (root / "outputs").exists()


def test_a_notebook_linked_from_outside_the_notebooks_folder_is_refused(tmp_path):
    (tmp_path / "notebooks").mkdir()
    outside = tmp_path / "outside.ipynb"
    outside.write_text(json.dumps(EMPTY_NOTEBOOK))
    (tmp_path / "notebooks" / "linked.ipynb").symlink_to(outside)
    batch = write_batch(tmp_path, [{"notebook": "linked"}])
    with pytest.raises(ValueError, match="runs.0.notebook.*does not name a notebook inside"):
        load_batch(batch, notebooks_dir=tmp_path / "notebooks")


def test_a_run_folder_planted_as_a_link_out_of_outputs_is_refused_and_not_cleared(
    capsys, tmp_path, in_project
):
    batch = write_batch(tmp_path, [{"notebook": "00_backend_check"}])
    [spec], _ = load_batch(batch, notebooks_dir=PROJECT_ROOT / "notebooks")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "planted.txt").write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / spec.run_id).symlink_to(elsewhere, target_is_directory=True)
    code, err = run_cli(capsys, batch, "--outputs", str(out), "--force")
    assert code == 2 and len(err) == 1 and spec.run_id in err[0] and "not inside the outputs folder" in err[0]
    assert (elsewhere / "planted.txt").read_text() == "keep me"


FAILING_NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": "fails",
            "metadata": {},
            "outputs": [],
            "source": "raise ValueError('the planted reason: table x has no column y')",
        }
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


@pytest.mark.usefixtures("notebook_kernels")
def test_a_failed_notebook_reports_its_own_exception(capsys, tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "fails.ipynb").write_text(json.dumps(FAILING_NOTEBOOK))
    batch = write_batch(tmp_path, [{"notebook": "fails"}])
    monkeypatch.chdir(tmp_path)
    code, err = run_cli(capsys, batch)
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith("FAILED fails-")
    assert "ValueError: the planted reason: table x has no column y" in err[0]
    run = json.loads(next((tmp_path / "outputs").glob("fails-*/run.json")).read_text())
    assert run["status"] == "failed" and run["error"].startswith("ValueError: the planted reason")


@pytest.mark.usefixtures("notebook_kernels")
def test_a_corrupt_cache_fails_the_run_in_one_line(capsys, tmp_path, in_project):
    cache = tmp_path / "cache.sqlite"
    cache.write_bytes(b"this is not a database" * 200)
    batch = write_batch(tmp_path, [{"notebook": "00_backend_check"}])
    code, err = run_cli(capsys, batch, "--outputs", str(tmp_path / "out"))
    assert code == 1 and len(err) == 1 and err[0].startswith("FAILED 00_backend_check-"), err
    reason = err[0].split(": ", 1)[1]
    assert not reason.startswith("PapermillExecutionError") and "Error" in reason.split(":")[0], reason
    assert reason.startswith("CacheError") and str(cache) in reason, reason


@pytest.mark.fault
def test_a_settings_error_never_prints_url_credentials(capsys, tmp_path, in_project):
    batch = write_batch(tmp_path, [{"notebook": "00_backend_check"}])
    bad_url = "llm.base_url=ftp://alice:s3cretpw@example.org/v1"  # refused by the URL pattern
    code, err = run_cli(capsys, batch, "--set", bad_url, "--set", "llm.backend=openai_compatible")
    assert code == 2 and len(err) == 1 and "llm.base_url" in err[0], err
    assert "s3cretpw" not in err[0] and "alice" not in err[0], err
