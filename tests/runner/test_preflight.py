"""Every setting is checked before any model call: bounds, finite floats and cross-field rules by
validation, registry names and paths by the preflight; an error names the source and the dotted key.

The walk over every settings field is generated from the `Settings` model: each leaf field gets
invalid values derived from its type and constraints, and a field that needs another setting to be
wrong, or cannot be wrong, is listed below with the reason.
"""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import annotated_types
import pytest
import yaml
from conftest import PROJECT_ROOT, batch_runs
from pydantic import AfterValidator
from pydantic.fields import FieldInfo

from ragtrial.config.base import ExistingPath, Names, ParamsError, Section
from ragtrial.config.batch import deep_merge, dotted_to_nested
from ragtrial.config.settings import Settings, validate_settings
from ragtrial.runner.batch import run_batch
from ragtrial.runner.preflight import check_settings

MISSING_PATH = "/nonexistent/ragtrial-preflight"

FOLDER = str(PROJECT_ROOT / "tests" / "fixtures" / "data" / "multihop_ok")

# Fields whose invalid values cannot be read off their type: each value is wrong given the defaults
# and the field's CONTEXT.
CONTEXTUAL: dict[str, list[Any]] = {
    "qa.baseline": ["no_such_method", "bm25"],  # not among qa.methods
    "summarization.baseline": ["no_such_method", "bm25"],
    "data.options": [{"colour": "red"}, {"seed": 3}],  # not a loader option; set by data.seed
    "cache.url": ["outputs/cache/x.sqlite", "sqlite://x.sqlite", "mysql://db/x", "postgresql://"],
    "store.url": ["mysql://u@h/db", "outputs/store"],
    "store.schema_name": ["Mine", "1st", "my-schema", 'x"; DROP SCHEMA y'],
    "store.graph_url": ["http://127.0.0.1:6379", "127.0.0.1:6379"],
    "benchmark.lead_measure": ["recall@3", "mrr", "nope@5"],  # a k not in ks, no cut-off, no measure
    "benchmark.compare_with": ["no_such_retriever", "ts_rank"],  # not among benchmark.retrievers
    "benchmark.retrieval_files": [{"nope": {"reads_graph": False}}],  # not in methods.answer_files
}
# The other settings a field's invalid value is tried with, so that it is the only thing wrong.
CONTEXT: dict[str, dict[str, Any]] = {
    "data.dataset": {"data": {"path": FOLDER}},  # a real data set needs a folder
    "data.options": {"data": {"dataset": "multihop_rag", "path": FOLDER}},
}
# Fields no value of their type makes wrong, and why.
FREE = {
    # each answers file is read by the preflight (tests/runner/test_preflight_answer_files.py)
    "methods.answer_files": "a mapping of files, each read and validated by the preflight",
    "questions.corpus_description": "free text the persona prompts see; None: the model writes one",
    "systems.fast_graphrag.example_queries": "free-text queries steering fast-graphrag's extraction",
    "systems.graphrag.graphrag_settings": "GraphRAG's own settings, validated by GraphRAG (GraphRagConfig)",
    # question types are data (any loader's), not a registry: an unknown type only exempts nothing
    **{
        f"{section}.whole_answer_types": "types answered in full; a type no question has changes nothing"
        for section in ("qa", "summarization", "judge", "claims", "diagnostics", "upstream")
    },
    "diagnostics.question_types": "question types are data: a type no question has selects nothing, and "
    "diagnosis_questions names the types the data set has when none is left",
    "benchmark.question_types": "question types are data: a type no question has selects nothing",
    "diagnostics.categories": "keys are data-set question types (data); values: one of the four categories",
    "compare.runs": "run ids or prefixes: report.index_page.matching_run refuses an unknown or ambiguous one "
    "by name (tests/runner/test_compared_runs.py)",
    "compare.notebook": "a notebook name: one the batch did not run leaves no runs to compare, and the "
    "report says so (tests/cli/test_compare.py)",
    "sweep.runs": "run ids or prefixes: report.index_page.matching_run refuses an unknown or ambiguous one "
    "by name (tests/runner/test_sweep_runs.py)",
    "sweep.notebook": "a notebook name: one the batch did not run leaves no points, and the report says so",
    "sweep.keys": "dotted settings keys: read_sweep refuses one the points do not record, naming it "
    "(tests/runner/test_sweep_runs.py)",
    "sweep.heatmap": "two varied keys: read_sweep refuses another count or a key that did not vary, naming "
    "it (tests/runner/test_sweep_runs.py)",
    "verdict.runs": "run ids: combine_runs refuses a missing, unfinished or mismatched one by name "
    "(tests/runner/test_combined_runs.py)",
    "verdict.quality_value": "keys are measures, checked by the verdict against MEASURES (tests/evaluation)",
    "verdict.target_difference": "keys are measures, checked by the verdict against MEASURES "
    "(tests/evaluation)",
    "diagnostics.entity_recall_thresholds": "a dict: its keys are checked against the categories and its "
    "values are shares in [0, 1] (tests/config)",
    "calibration.audit_run": "a run id: combine_runs refuses a missing, unfinished or mismatched one by name "
    "(tests/runner/test_combined_runs.py)",
    "calibration.parameters": "keys are the simulated judge's parameter names (a Literal); each value is "
    "checked by JudgeModel, which names it, when notebook 12 builds its judge (no model call is at stake)",
}


def _metadata(annotation: Any) -> tuple[Any, list[Any]]:
    """The bare type and the constraints of an annotation (Annotated metadata, FieldInfo's included)."""
    found: list[Any] = []
    while typing.get_origin(annotation) is typing.Annotated:
        annotation, *extra = typing.get_args(annotation)
        for item in extra:
            found.extend(item.metadata if isinstance(item, FieldInfo) else [item])
    return annotation, found


def invalid_values(annotation: Any, metadata: list[Any]) -> list[Any]:
    """Values the annotation and its constraints reject (empty when nothing about them says)."""
    annotation, inner = _metadata(annotation)
    metadata = [*metadata, *inner]
    bad: list[Any] = []
    for m in metadata:
        if isinstance(m, Names):
            bad.append(f"no_such_{m.kind.replace(' ', '_')}")
        elif isinstance(m, ExistingPath):
            bad.append(MISSING_PATH)
        elif isinstance(m, AfterValidator):  # answer prompts: a path, even to a real prompt file
            bad += [
                "/etc/passwd",
                str(PROJECT_ROOT / "lib/ragtrial/prompts/query/answer.txt"),
                "judge_score",
                "rate_relevance",
            ]
        elif isinstance(m, annotated_types.MinLen):
            bad.append("" if annotation is str else [])
        elif getattr(m, "pattern", None):
            bad.append("not a valid value")
        for name, shift in (("ge", -1), ("gt", 0), ("le", 1), ("lt", 0)):
            if getattr(m, name, None) is not None:
                bad.append(getattr(m, name) + shift)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            if arg is not type(None):
                bad += invalid_values(arg, metadata if typing.get_origin(arg) is None else [])
    elif origin is typing.Literal:
        bad.append("not_a_choice")
    elif origin is list:
        bad += [[item] for item in invalid_values(args[0], [])]
    elif origin is tuple:
        bad += [tuple(item for _ in args) for item in invalid_values(args[0], [])]
    elif annotation is float:
        bad += [math.nan, math.inf]
    elif annotation is bool:
        bad.append("maybe")
    return bad


def leaf_fields(section: type[Section] = Settings, prefix: str = "") -> Iterator[tuple[str, FieldInfo]]:
    for name, field in section.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, Section):
            yield from leaf_fields(field.annotation, f"{prefix}{name}.")
        else:
            yield prefix + name, field


def invalid_cases() -> list[tuple[str, Any]]:
    cases = []
    for key, field in leaf_fields():
        default = field.get_default(call_default_factory=True)
        for value in CONTEXTUAL.get(key, []) + invalid_values(field.annotation, list(field.metadata)):
            # One bad item among the default ones, so that rules on the whole list (a baseline among
            # the methods) still hold and only the item is wrong.
            cases.append((key, default + value if value and isinstance(default, list) else value))
    return cases


def test_every_field_has_an_invalid_value_or_a_reason() -> None:
    covered = {key for key, _ in invalid_cases()}
    unchecked = [key for key, _ in leaf_fields() if key not in covered and key not in FREE]
    assert not unchecked, f"settings with no bound, name or path check and no reason in FREE: {unchecked}"
    numeric = [
        key
        for key, field in leaf_fields()
        if _metadata(field.annotation)[0] in (int, float, int | None, float | None)
        and not any(hasattr(m, a) for m in field.metadata for a in ("ge", "gt", "le", "lt"))
    ]
    assert not numeric, f"numeric settings without bounds: {numeric}"


def rejects(values: dict[str, Any], key: str) -> str:
    """The error message for `values`, from validation or the preflight; it must name `key`."""
    with pytest.raises(ParamsError) as caught:
        check_settings(validate_settings(values, "batch.yaml (runs.0)"), "batch.yaml (runs.0)", PROJECT_ROOT)
    message = str(caught.value)
    assert message.startswith("batch.yaml (runs.0): ")
    assert re.search(rf"key '{re.escape(key)}[.']", message), message
    return message


@pytest.mark.fault
@pytest.mark.parametrize(("key", "value"), invalid_cases(), ids=lambda v: repr(v)[:40])
def test_invalid_value_is_rejected_naming_the_dotted_key(key: str, value: Any) -> None:
    rejects(deep_merge(CONTEXT.get(key, {}), dotted_to_nested(key, value)), key)


CROSS_FIELD = [
    ({"index": {"chunk_size": 100, "chunk_overlap": 100}}, "index.chunk_overlap"),
    ({"index": {"graph_source": "import"}}, "index.import_path"),
    ({"llm": {"backend": "openai_compatible"}}, "llm.base_url"),
    ({"llm": {"backoff_initial_s": 5, "backoff_max_s": 1}}, "llm.backoff_max_s"),
    ({"embeddings": {"backend": "openai_compatible"}}, "embeddings.base_url"),
    ({"data": {"dataset": "musique"}}, "data.path"),
    ({"data": {"dataset": "musique", "path": str(PROJECT_ROOT / "README.md")}}, "data.path"),
    ({"qa": {"methods": ["hybrid", "graph_walk"]}}, "qa.baseline"),
    ({"qa": {"methods": ["naive_rag", "naive_rag"]}}, "qa.methods"),
    ({"judge": {"pairs": [["naive_rag", "naive_rag"]]}}, "judge.pairs"),
    ({"judge": {"pairs": [["naive_rag", "hybrid"]]}}, "judge.pairs"),
    ({"claims": {"judge": "file"}}, "claims.verdicts_path"),
    ({"claims": {"judge": "file", "verdicts_path": str(PROJECT_ROOT)}}, "claims.verdicts_path"),
    ({"questions": {"min_hops": 60, "max_walk_steps": 50}}, "questions.max_walk_steps"),
    (
        {"retrieval": {"local_community_prop": 0.6, "local_text_unit_prop": 0.6}},
        "retrieval.local_text_unit_prop",
    ),
]


@pytest.mark.fault
@pytest.mark.parametrize(("values", "key"), CROSS_FIELD)
def test_cross_field_rule_names_the_key(values: dict[str, Any], key: str) -> None:
    rejects(values, key)


def test_defaults_and_every_params_file_pass(tmp_path) -> None:
    check_settings(Settings(), "defaults", PROJECT_ROOT)
    for path in sorted((PROJECT_ROOT / "params").glob("*.yaml")):
        for spec in batch_runs(path):
            if (PROJECT_ROOT.parent / "shared").is_dir() or spec.settings.data.path is None:
                check_settings(spec.settings, spec.source, PROJECT_ROOT)


def test_prompt_error_says_prompts_are_named_not_paths(tmp_path) -> None:
    outside = tmp_path / "answer.txt"
    outside.write_text("version: 1\n---\nIgnore the context. $context $question")
    message = rejects({"qa": {"answer_prompt": str(outside.with_suffix(""))}}, "qa.answer_prompt")
    assert "named, not a path" in message and "summarize_query" in message
    message = rejects({"judge": {"reduce_prompt": "judge_score"}}, "judge.reduce_prompt")
    assert "$context and $question" in message


@pytest.mark.fault
@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"qa": {"methods": ["naive_rag", "bogus"]}}, "qa.methods.1"),
        ({"data": {"dataset": "musique", "path": MISSING_PATH}}, "data.path"),
        ({"llm": {"max_tokens": -1}}, "llm.max_tokens"),
    ],
)
def test_invalid_batch_makes_no_request(scripted, tmp_path, settings, key) -> None:
    """The README's promise: a batch with an invalid value stops before any model call."""
    llm = {"backend": "openai_compatible", "base_url": scripted.base_url, "model": "scripted"}
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        yaml.safe_dump(
            {
                "settings": {"llm": llm, "cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"}},
                "runs": [
                    {"notebook": "00_backend_check"},
                    {"notebook": "04_rag_vs_graphrag_qa", "settings": settings},
                ],
            }
        )
    )
    with pytest.raises(
        ParamsError, match=rf"batch\.yaml \(runs\.1, notebook 04_rag_vs_graphrag_qa\).*key '{key}'"
    ):
        run_batch(batch, root=PROJECT_ROOT, outputs=tmp_path / "out", log=lambda _: None)
    assert scripted.requests == []
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


# ---------------------------------------------------------------- the data root


def test_params_files_name_data_folders_under_the_data_root_only() -> None:
    """No params file names a machine's folder: data paths are relative, without a way out of the root."""
    seen = 0
    for path in sorted((PROJECT_ROOT / "params").glob("*.yaml")):
        for spec in batch_runs(path):
            for value in (spec.settings.data.path, spec.settings.index.import_path):
                if value is None:
                    continue
                seen += 1
                assert not Path(value).is_absolute() and ".." not in Path(value).parts, (spec.source, value)
    assert seen >= 8  # the paper batches and the real-data check name their data sets


@pytest.mark.fault
def test_relative_data_paths_resolve_under_the_data_root(tmp_path, monkeypatch) -> None:
    (tmp_path / "datasets" / "my_copy").mkdir(parents=True)
    monkeypatch.setenv("RAGTRIAL_DATA_ROOT", str(tmp_path / "datasets"))
    settings = {"data": {"dataset": "multihop_rag", "path": "my_copy"}}
    check_settings(validate_settings(settings, "batch.yaml"), "batch.yaml", PROJECT_ROOT)
    # A relative root is relative to the project root; unset means the project's data/ folder.
    monkeypatch.setenv("RAGTRIAL_DATA_ROOT", "relative/root")
    message = rejects(settings, "data.path")
    assert str(PROJECT_ROOT / "relative" / "root" / "my_copy") in message
    monkeypatch.delenv("RAGTRIAL_DATA_ROOT")
    message = rejects(settings, "data.path")
    assert str(PROJECT_ROOT / "data" / "my_copy") in message and "RAGTRIAL_DATA_ROOT unset" in message


@pytest.mark.fault
def test_missing_data_set_names_it_and_where_it_is_published(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RAGTRIAL_DATA_ROOT", str(tmp_path))
    message = rejects({"data": {"dataset": "musique", "path": "musique_sample_hipporag"}}, "data.path")
    assert str(tmp_path / "musique_sample_hipporag") in message
    assert f"RAGTRIAL_DATA_ROOT={tmp_path}" in message
    assert "data set 'musique' is published at" in message and "StonyBrookNLP/musique" in message
    imported = {"index": {"graph_source": "import", "import_path": "graphrag_examples/an_index"}}
    message = rejects(imported, "index.import_path")
    assert str(tmp_path / "graphrag_examples" / "an_index") in message
