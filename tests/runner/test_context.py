"""The run context: result tables are written inside the run folder only; data flaws are shown."""

import pandas as pd
import pytest

from ragtrial.runner.context import open_run


@pytest.mark.fault
@pytest.mark.parametrize("name", ["../escaped", "/tmp/escaped", "sub/table", ".."])
def test_a_table_name_cannot_leave_the_run_folder(tmp_path, name):
    ctx = open_run({"cache_path": str(tmp_path / "cache.sqlite")}, tmp_path / "out" / "run", notebook="t")
    with pytest.raises(ValueError, match="a plain file name is needed"):
        ctx.save_table(pd.DataFrame({"a": [1]}), name)
    assert sorted(p.name for p in tmp_path.rglob("*.csv")) == []
    ctx.save_table(pd.DataFrame({"a": [1]}), "fine_table")
    assert (tmp_path / "out" / "run" / "tables" / "fine_table.parquet").is_file()


def test_flaws_kept_as_published_are_shown_and_saved(tmp_path, monkeypatch, recwarn):
    from conftest import PROJECT_ROOT

    path = PROJECT_ROOT / "tests" / "fixtures" / "data" / "qmsum_repeated_query_text"
    settings = {"cache_path": str(tmp_path / "cache.sqlite"), "data": {"dataset": "qmsum", "path": str(path)}}
    ctx = open_run(settings, tmp_path / "run", notebook="t")
    shown = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    dataset = ctx.load_dataset()
    saved = pd.read_csv(tmp_path / "run" / "tables" / "data_warnings.csv")
    assert saved["warning"].tolist() == dataset.warnings and len(dataset.warnings) == 1
    assert [type(m).__name__ for m in shown] == ["Markdown"]  # the report says so
    assert "1 flaw(s) kept as published" in shown[0].data and "same query text as" in shown[0].data


def test_a_clean_data_set_writes_no_warnings_table(tmp_path):
    ctx = open_run({"cache_path": str(tmp_path / "cache.sqlite")}, tmp_path / "run", notebook="t")
    assert ctx.load_dataset().warnings == [] and not (tmp_path / "run" / "tables").exists()
