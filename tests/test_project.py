"""Project hygiene: the conda file matches pyproject, notebooks carry no outputs, prompts are versioned."""

import json
import re
import tomllib

import nbformat
import pytest
import yaml
from conftest import PROJECT_ROOT, batch_runs

from ragtrial.prompts import load_prompt, prompt_files


def test_environment_yml_names_the_same_dependencies_as_pyproject():
    pyproject = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((PROJECT_ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip_section = next(d for d in env["dependencies"] if isinstance(d, dict))["pip"]
    assert sorted(d for d in pip_section if not d.startswith("-e")) == sorted(pyproject)


NOTEBOOKS = sorted((PROJECT_ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs_and_has_one_parameters_cell(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "clear outputs before committing"
    tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    assert "settings: dict = {}" in tagged[0].source and 'run_dir: "Optional[str]" = None' in tagged[0].source
    assert f'notebook="{path.stem}", overrides=overrides)' in "".join(c.source for c in code)
    # nbformat.read adds missing ids in memory (and papermill warns): the committed cells carry their own
    ids = [c.get("id") for c in json.loads(path.read_text())["cells"]]
    assert None not in ids and len(set(ids)) == len(ids), "every cell needs its own id"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_parameters_cell_documents_itself_to_papermill_help_notebook(path, tmp_path):
    """`papermill --help-notebook` lists settings, run_dir and overrides with their types and help, and
    the `-p overrides` example the cell gives sets valid settings.
    """
    import papermill

    from ragtrial.config.batch import parse_set_overrides, split_overrides
    from ragtrial.config.settings import validate_settings

    inspected = papermill.inspect_notebook(str(path))
    assert list(inspected) == ["settings", "run_dir", "overrides"]
    types = {name: p["inferred_type_name"] for name, p in inspected.items()}
    assert types == {"settings": "dict", "run_dir": "Optional[str]", "overrides": "str"}
    assert all(len(p["help"]) > 30 for p in inspected.values())
    assert "--set" in inspected["overrides"]["help"] and inspected["overrides"]["default"] == '""'
    nb = nbformat.read(path, as_version=4)
    source = next(c.source for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    example = re.search(
        rf"# e\.g\. papermill notebooks/{path.stem}\.ipynb \S+ -p overrides \"([^\"]+)\"", source
    )
    assert example, source
    items = split_overrides(example[1])
    assert len(items) == 2
    validate_settings(parse_set_overrides(items), f"the example of {path.name}")


def test_every_prompt_file_parses_with_a_version():
    names = list(prompt_files())
    assert names
    for name in names:
        prompt = load_prompt(name)
        assert prompt.version and prompt.template.strip(), name


def test_default_batch_runs_every_notebook_on_the_embedded_model():
    from ragtrial.config.batch import load_batch

    specs, _ = load_batch(PROJECT_ROOT / "params" / "default.yaml", notebooks_dir=PROJECT_ROOT / "notebooks")
    notebooks = sorted(p.stem for p in (PROJECT_ROOT / "notebooks").glob("*.ipynb"))
    # the real evidence first (params/real_evidence.yaml, included), then the notebooks in order
    real_evidence = "13_retrieval_benchmark"
    in_order = [real_evidence, *(n for n in notebooks if n != real_evidence)]
    assert list(dict.fromkeys(s.notebook for s in specs)) == in_order
    assert all(s.settings.llm.backend == "embedded" for s in specs)
    real_data = ["musique", "2wikimultihopqa", "hotpotqa", "multihop_rag"]
    assert [(s.notebook, s.settings.data.dataset) for s in specs[:4]] == [
        ("13_retrieval_benchmark", name) for name in real_data
    ]
    # then the generated corpus, except the real systems' run and the imported answers' judging
    real = [
        (s.notebook, s.settings.data.dataset) for s in specs[4:] if s.settings.data.dataset != "generated"
    ]
    assert real == [("11_upstream_systems", "text_folder"), ("07_pairwise_method_comparison", "ultradomain")]


@pytest.mark.parametrize("batch", sorted(p.name for p in (PROJECT_ROOT / "params").glob("*.yaml")))
def test_every_params_file_validates(batch):
    assert batch_runs(f"params/{batch}")
