"""The notebooks reference (docs/notebooks.md) and the README's notebook table are generated from the
notebook registry, and stay current.
"""

from __future__ import annotations

from conftest import PROJECT_ROOT

from ragtrial.cli import main
from ragtrial.cli.notebooks import (
    README_TABLE_BEGIN,
    README_TABLE_END,
    notebooks_reference,
    readme_notebook_table,
)
from ragtrial.config.notebooks import notebook_specs


def test_docs_notebooks_md_is_the_generated_reference():
    committed = (PROJECT_ROOT / "docs" / "notebooks.md").read_text()
    assert committed == notebooks_reference(), (
        "docs/notebooks.md is stale: regenerate it with `ragtrial notebooks --markdown > docs/notebooks.md`"
    )


def test_the_readme_table_is_the_generated_one():
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert readme.count(README_TABLE_BEGIN) == 1 and readme.count(README_TABLE_END) == 1
    region = readme.split(README_TABLE_BEGIN + "\n")[1].split(README_TABLE_END)[0]
    assert region == readme_notebook_table(), (
        f"the README's notebook table is stale: replace the lines between {README_TABLE_BEGIN} and "
        f"{README_TABLE_END} with the output of `ragtrial notebooks --readme-table`"
    )


def test_every_notebook_has_its_row_and_its_section():
    table, reference = readme_notebook_table(), notebooks_reference()
    assert len(table.splitlines()) == 2 + len(notebook_specs()) == 18
    for spec in notebook_specs():
        row = next(
            line for line in table.splitlines() if f"[`{spec.name}`](notebooks/{spec.name}.ipynb)" in line
        )
        assert spec.question in row and ", ".join(spec.needs or ("none",)) in row
        assert f"## [`{spec.name}`](../notebooks/{spec.name}.ipynb)\n\n{spec.question}\n" in reference
    qa = reference.split("## [`04_rag_vs_graphrag_qa`]")[1].split("\n## ")[0]
    assert "| gold it needs | answers |" in qa and "| settings | [`qa`](settings.md#qa) |" in qa
    assert "| methods | `qa.methods` |" in qa and "`ragtrial.report.narrative.tasks:narrate_qa`" in qa
    judge = reference.split("## [`06_judge_bias_audit`]")[1].split("\n## ")[0]
    assert "| without gold | it asks generated questions: `judge.question_source: graph` |" in judge


def test_the_command_prints_the_reference(capsys):
    assert main(["notebooks", "--markdown"]) == 0
    assert capsys.readouterr().out == notebooks_reference()
    assert main(["notebooks"]) == 0
    assert "12_judge_calibration\n    Does the judge protocol" in capsys.readouterr().out
