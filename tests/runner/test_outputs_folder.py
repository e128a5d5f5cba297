"""`ragtrial run` from a folder `init` made, from below it, and with `--outputs`: the runs, the cache and
the indexes all go to the outputs folder, and the run ids do not change with it.
"""

from __future__ import annotations

import pytest
import yaml
from conftest import endpoint_settings
from latency_server import schema_reply

from ragtrial.cli import main
from ragtrial.config.batch import load_batch
from ragtrial.config.paths import WORKSPACE_FILE, notebooks_dir, project_root

pytestmark = pytest.mark.usefixtures("notebook_kernels")


def study_folder(tmp_path, base_url: str):
    """A folder as `ragtrial init` leaves it: `ragtrial.yaml`, the kit's default `outputs/` paths."""
    study = tmp_path / "study"
    (study / "notes").mkdir(parents=True)
    settings = endpoint_settings(base_url, study, data={"size": "tiny"}, index={"llm_max_chunks": 2})
    del (
        settings["cache"],
        settings["index"]["store_path"],
    )  # the defaults: outputs/cache, outputs/indexes
    (study / WORKSPACE_FILE).write_text(
        yaml.safe_dump({"settings": settings, "runs": [{"notebook": "01_build_index"}]})
    )
    return study


def test_outputs_moves_runs_cache_and_indexes_and_keeps_the_run_ids(scripted, tmp_path, monkeypatch, capsys):
    scripted.default_reply = schema_reply
    study = study_folder(tmp_path, scripted.base_url)
    monkeypatch.chdir(study / "notes")  # below the study folder: it is still the project root
    assert project_root() == study
    specs, _ = load_batch(study / WORKSPACE_FILE, notebooks_dir=notebooks_dir(study))
    assert main(["run", WORKSPACE_FILE, "--outputs", str(tmp_path / "moved")]) == 0
    moved = tmp_path / "moved"
    assert (moved / specs[0].run_id / "run.json").is_file()
    assert (moved / "cache" / "ragtrial.sqlite").is_file()
    assert [p.name for p in (moved / "indexes").iterdir() if p.is_dir()]
    assert not (study / "outputs").exists()  # nothing the run wrote stayed behind
    assert capsys.readouterr().out.strip().endswith(str(moved / "index.html"))

    # without --outputs: the same run id, under the study folder; its calls replay from its own cache
    assert main(["run", WORKSPACE_FILE]) == 0
    assert (study / "outputs" / specs[0].run_id / "run.json").is_file()
    assert (study / "outputs" / "cache" / "ragtrial.sqlite").is_file()
