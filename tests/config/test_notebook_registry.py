"""The notebook registry: every notebook of notebooks/ is declared once, its lazy targets resolve, and a
notebook declared through the registry alone is estimated and checked by `ragtrial estimate` and
`ragtrial check` (a dummy notebook in a temporary project, its entry removed after).
"""

from __future__ import annotations

import functools
import json

import nbformat
import pandas as pd
import pytest
import yaml
from conftest import PROJECT_ROOT, endpoint_settings

from ragtrial.cli import main
from ragtrial.config.notebooks import (
    NOTEBOOKS,
    AskedQuestions,
    NotebookSpec,
    add_notebook,
    narrative_of,
    notebook_specs,
)
from ragtrial.config.settings import Settings
from ragtrial.registry import resolve

DUMMY = NotebookSpec(
    "13_dummy_word_count",
    "How many words do the gold answers have?",
    sections=("qa",),
    planner="ragtrial.runner.batch_estimate:plan_backend_check",
    narrative="ragtrial.report.narrative.backend:narrate",
    needs=("answers",),
    why_not="it counts the words of a data set's gold answers",
    methods=("qa.methods",),
)


def test_every_notebook_in_the_folder_is_registered_once_in_its_order():
    assert list(NOTEBOOKS) == sorted(p.stem for p in (PROJECT_ROOT / "notebooks").glob("*.ipynb"))


def test_each_entry_names_settings_and_functions_that_exist():
    settings = Settings()
    for spec in notebook_specs():
        assert callable(resolve(spec.planner)), spec.name
        assert callable(narrative_of(spec.name)), spec.name
        if spec.asks is not None:
            assert callable(resolve(spec.asks.sampler)), spec.name
            assert not spec.asks.section or spec.asks.section in spec.sections, spec.name
        assert spec.sections and set(spec.sections) <= set(Settings.model_fields), spec.name
        for key in [*spec.methods, *spec.without_gold, *spec.on_embedded]:
            functools.reduce(getattr, key.split("."), settings)  # a key of the settings


def test_the_verdict_and_the_questions_export_read_the_registry():
    from ragtrial.cli.questions import asking_notebooks
    from ragtrial.config.verdict import INPUT_NOTEBOOKS
    from ragtrial.evaluation.verdict import read_answers

    assert [n[:2] for n in asking_notebooks()] == ["04", "05", "06", "07", "08", "09"]
    assert [n[:2] for n in INPUT_NOTEBOOKS] == ["01", "04", "05", "07", "08", "09"]
    frame = pd.DataFrame({"method": ["naive_rag"]})
    answers = read_answers(lambda notebook, table: frame if table == "scores" else None, INPUT_NOTEBOOKS)
    assert [n[:2] for n in answers] == ["04", "05"]  # the notebooks whose answers are in `scores`


@pytest.fixture
def dummy_project(tmp_path, monkeypatch):
    """A project whose notebooks/ holds the dummy notebook, the working directory, with the dummy's
    registry entry added for the test and removed after.
    """
    project = tmp_path / "project"
    (project / "notebooks").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), project / "notebooks" / f"{DUMMY.name}.ipynb")
    monkeypatch.chdir(project)
    add_notebook(DUMMY)
    yield project
    NOTEBOOKS.remove(DUMMY.name)


def write_batch(project, base_url, **sections):
    settings = endpoint_settings(base_url, project, **{"data": {"size": "tiny"}, **sections})
    batch = project / "dummy.yaml"
    batch.write_text(yaml.safe_dump({"settings": settings, "runs": [{"notebook": DUMMY.name}]}))
    return batch


def test_estimate_plans_a_notebook_by_its_registry_entry(dummy_project, scripted, capsys):
    batch = write_batch(dummy_project, scripted.base_url)
    estimate = dummy_project / "estimate.json"
    assert main(["estimate", batch.name, "--outputs", "out", "--json", str(estimate)]) == 0
    table = pd.DataFrame(json.loads(estimate.read_text()))
    # the planner its entry names: notebook 00's two probes, counted exactly
    assert table[["notebook", "stage", "calls", "basis"]].to_dict("records") == [
        {"notebook": DUMMY.name, "stage": "backend_check", "calls": 2, "basis": "exact"}
    ]
    assert f"== {DUMMY.name}" in capsys.readouterr().out
    assert scripted.requests == []  # the estimate sends nothing
    NOTEBOOKS.remove(DUMMY.name)
    try:
        assert main(["estimate", batch.name, "--outputs", "out"]) == 2
        err = capsys.readouterr().err
        assert f"no estimate for notebook '{DUMMY.name}' (known: 00_backend_check, " in err
        assert str(batch.name) in err and "\n" not in err.strip()
    finally:
        add_notebook(DUMMY)  # for the fixture to remove


def test_check_reads_the_gold_and_the_systems_a_registered_notebook_needs(dummy_project, scripted, capsys):
    batch = write_batch(dummy_project, scripted.base_url, qa={"methods": ["naive_rag", "lightrag_hku_naive"]})
    assert main(["check", batch.name, "--outputs", "out"]) == 0
    out = capsys.readouterr().out
    assert f"it has the gold {DUMMY.name} need" in out  # `needs`
    assert "system lightrag: lightrag-hku" in out  # found from `methods`: qa.methods
    (dummy_project / "corpus").mkdir()
    (dummy_project / "corpus" / "carol.txt").write_text("Scrooge kept the counting house.")
    corpus = {"dataset": "text_folder", "path": str(dummy_project / "corpus")}
    folder = write_batch(dummy_project, scripted.base_url, data=corpus)
    assert main(["check", folder.name, "--outputs", "out"]) == 2
    err = capsys.readouterr().err
    assert f"notebook {DUMMY.name} cannot run on data set 'text_folder'" in err
    assert "no answers" in err and DUMMY.why_not in err


def test_an_asking_entry_is_what_questions_export_offers(dummy_project, scripted, capsys):
    add_notebook(
        NotebookSpec(
            "14_dummy_asking",
            "Which questions?",
            sections=("qa",),
            planner=DUMMY.planner,
            narrative=DUMMY.narrative,
            asks=AskedQuestions("ragtrial.questions.sampling:qa_questions"),
        )
    )
    try:
        nbformat.write(nbformat.v4.new_notebook(), dummy_project / "notebooks" / "14_dummy_asking.ipynb")
        batch = write_batch(dummy_project, scripted.base_url)
        runs = [{"notebook": DUMMY.name}, {"notebook": "14_dummy_asking"}]
        batch.write_text(yaml.safe_dump({**yaml.safe_load(batch.read_text()), "runs": runs}))
        exported = dummy_project / "questions.jsonl"
        assert main(["questions", "export", batch.name, "--to", str(exported)]) == 0
        rows = [json.loads(line) for line in exported.read_text().splitlines()]
        assert rows and all(row["answers"] for row in rows)  # the QA questions of the tiny corpus
        assert "of 14_dummy_asking written" in capsys.readouterr().out
    finally:
        NOTEBOOKS.remove("14_dummy_asking")
