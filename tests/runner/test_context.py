"""The run context: result tables are written inside the run folder only; data flaws are shown."""

import pandas as pd
import pytest

from ragtrial.config.base import ParamsError
from ragtrial.runner.context import HEADLINE_FILE, open_run


@pytest.mark.fault
@pytest.mark.parametrize("name", ["../escaped", "/tmp/escaped", "sub/table", ".."])
def test_a_table_name_cannot_leave_the_run_folder(tmp_path, name):
    ctx = open_run(
        {"cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"}}, tmp_path / "out" / "run", notebook="t"
    )
    with pytest.raises(ValueError, match="a plain file name is needed"):
        ctx.save_table(pd.DataFrame({"a": [1]}), name)
    assert sorted(p.name for p in tmp_path.rglob("*.csv")) == []
    ctx.save_table(pd.DataFrame({"a": [1]}), "fine_table")
    assert (tmp_path / "out" / "run" / "tables" / "fine_table.parquet").is_file()


def test_flaws_kept_as_published_are_shown_and_saved(tmp_path, monkeypatch, recwarn):
    from conftest import PROJECT_ROOT

    path = PROJECT_ROOT / "tests" / "fixtures" / "data" / "qmsum_repeated_query_text"
    settings = {
        "cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"},
        "data": {"dataset": "qmsum", "path": str(path)},
    }
    ctx = open_run(settings, tmp_path / "run", notebook="t")
    shown = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    dataset = ctx.load_dataset()
    saved = pd.read_csv(tmp_path / "run" / "tables" / "data_warnings.csv")
    assert saved["warning"].tolist() == dataset.warnings and len(dataset.warnings) == 1
    assert [type(m).__name__ for m in shown] == ["Markdown"]  # the report says so
    assert "1 flaw(s) kept as published" in shown[0].data and "same query text as" in shown[0].data


def test_a_clean_data_set_writes_no_warnings_table(tmp_path):
    ctx = open_run(
        {"cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"}}, tmp_path / "run", notebook="t"
    )
    assert ctx.load_dataset().warnings == [] and not (tmp_path / "run" / "tables").exists()


def test_overrides_set_single_dotted_settings_over_the_settings_dict(tmp_path):
    settings = {
        "cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"},
        "qa": {"questions_per_type": 2, "seed": 3},
    }
    ctx = open_run(
        settings, tmp_path / "run", notebook="t", overrides="qa.questions_per_type=5; llm.model=m-1"
    )
    assert ctx.settings.qa.questions_per_type == 5 and ctx.settings.llm.model == "m-1"
    assert ctx.settings.qa.seed == 3  # the rest of the dict stands
    with pytest.raises(ParamsError, match="qa.no_such_key"):
        open_run(settings, tmp_path / "run", notebook="t", overrides="qa.no_such_key=1")


def test_the_headline_is_one_line_without_markdown_marks_but_with_method_names(tmp_path):
    ctx = open_run(
        {"cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"}}, tmp_path / "run", notebook="t"
    )
    line = ctx.headline("> **graph_hybrid** beat `naive_rag`\non *these* questions.")
    assert line == "graph_hybrid beat naive_rag on these questions."
    assert (tmp_path / "run" / HEADLINE_FILE).read_text() == line + "\n"


def test_a_notebook_that_needs_gold_stops_at_the_data_set_with_one_line(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text("Ada met Kel.")
    settings = {
        "cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"},
        "data": {"dataset": "text_folder", "path": str(folder)},
    }
    with pytest.raises(ParamsError) as raised:
        open_run(settings, tmp_path / "run", notebook="04_rag_vs_graphrag_qa").load_dataset()
    assert "\n" not in str(raised.value) and "data set 'text_folder'" in str(raised.value)
    assert "has no answers" in str(raised.value)
    # a notebook that needs no gold loads the same folder
    assert open_run(settings, tmp_path / "run2", notebook="01_build_index").load_dataset().documents
