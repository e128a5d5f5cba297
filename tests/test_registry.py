"""One registry shape for methods, retrievers, data loaders, metrics and notebooks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ragtrial.config.notebooks import NOTEBOOKS
from ragtrial.data import LOADERS
from ragtrial.evaluation.answer_metrics import METRICS, metric_entry
from ragtrial.methods.registry import METHODS
from ragtrial.registry import Registry
from ragtrial.retrieval.registry import RETRIEVERS


def test_unknown_names_list_the_known_ones_and_names_are_unique():
    registry: Registry[int] = Registry("widget")
    registry.add("one", 1, "the first")
    with pytest.raises(ValueError, match=r"unknown widget 'two'; known: one"):
        registry.get("two")
    with pytest.raises(ValueError, match="registered twice"):
        registry.add("one", 2, "again")
    assert registry.table().to_dict("records") == [{"name": "one", "description": "the first"}]


def test_a_dotted_target_is_imported_on_first_use_only():
    registry: Registry[type] = Registry("thing")
    registry.add("decoder", "json:JSONDecoder", "a class named by path")
    assert registry.entry("decoder").target == "json:JSONDecoder"
    import json

    assert registry.get("decoder") is json.JSONDecoder


def test_naming_a_retriever_does_not_import_llama_index():
    probe = (
        "import sys; from ragtrial.retrieval.registry import RETRIEVERS; "
        "assert RETRIEVERS.entry('kg_triplets').description; "
        "assert RETRIEVERS.get('vector').__name__ == 'VectorRetriever'; "
        "assert 'ragtrial.retrieval.llamaindex_bridge' not in sys.modules, 'bridge imported'"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("registry", [METHODS, RETRIEVERS, LOADERS, METRICS, NOTEBOOKS], ids=lambda r: r.kind)
def test_every_entry_is_described(registry):
    assert len(registry) and all(row["description"] for row in registry.table().to_dict("records"))


def test_metric_metadata_decides_direction_and_paired_test():
    accuracy = metric_entry("accuracy").metadata
    assert {k: accuracy[k] for k in ("higher_is_better", "paired_test")} == {
        "higher_is_better": True,
        "paired_test": "mcnemar",
    }
    assert metric_entry("recall@10").name == "recall@k"
    assert metric_entry("bertscore_f1").metadata["paired_test"] == "wilcoxon"
    assert {METRICS.entry(m).metadata["paired_test"] for m in ("em", "all_supporting")} == {"mcnemar"}


def test_every_loader_says_where_its_data_set_was_published():
    assert all(LOADERS.entry(name).metadata["published_at"] for name in LOADERS)
