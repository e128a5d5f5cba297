"""The index build's corpus-scale stages on a real two-node Ray cluster on 127.0.0.1 (`tests/ray_cluster.py`,
one CPU a node) against the scripted endpoint: the same tables, ids, index folder and calls as the
single-machine build, a rebuild that pays nothing, and the failures that must not fall back to one
machine (an address without a cluster, a URL with a password, a node without the API key).

The cluster is the session's (`conftest.cluster`): this file and the engine's tests are one xdist group,
so under `make test`'s workers they run on one worker, in order, on one cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from conftest import PROJECT_ROOT, endpoint_settings
from latency_server import schema_reply
from ray_cluster import free_port

from ragtrial.config.base import ParamsError
from ragtrial.data.experiment_dataset import load_experiment_dataset
from ragtrial.index.build import RAY_ADDRESS_ENV, build_index, index_path
from ragtrial.index.tables import EMBEDDINGS, SCHEMAS
from ragtrial.llm.ledger import read_ledger
from ragtrial.runner.context import open_run

# one worker runs every test of the session's Ray cluster, in order (Makefile: --dist loadgroup)
pytestmark = pytest.mark.xdist_group("ray_cluster")

# what the manifest's per-stage ledger holds besides the time the calls took
UNTIMED = ("stage", "method", "calls", "cached", "failures", "prompt_tokens", "completion_tokens")


def context(base_url, folder, name, **sections):
    """A run on the small generated corpus with both graphs, reports and embeddings; its own cache."""
    settings = endpoint_settings(
        base_url,
        folder,
        data={"size": "small"},
        llm={"fold_system": False, "concurrency": 4},
        index={"graph_source": "both", "reports": "llm"},
    )
    for section, values in sections.items():
        settings[section] = {**settings.get(section, {}), **values}
    return open_run(settings, folder / name, notebook=name)


def request_keys(requests: list[dict]) -> Counter:
    return Counter(r["path"] + json.dumps(r["body"], sort_keys=True) for r in requests)


def untimed_ledger(manifest: dict) -> list[dict]:
    return [{k: row[k] for k in UNTIMED} for row in manifest["ledger"]]


def test_a_distributed_build_has_the_single_machine_tables_ids_and_calls_and_a_rebuild_pays_nothing(
    cluster, scripted, tmp_path, monkeypatch
):
    scripted.default_reply = schema_reply
    single_ctx = context(scripted.base_url, tmp_path / "single", "single")
    dataset = load_experiment_dataset(single_ctx.settings.data)
    single = build_index(single_ctx, dataset)
    paid_single = request_keys(scripted.requests)
    scripted.requests.clear()

    monkeypatch.setenv(RAY_ADDRESS_ENV, cluster.address)
    ray_ctx = context(scripted.base_url, tmp_path / "ray", "ray")
    on_ray = build_index(ray_ctx, dataset)
    assert request_keys(scripted.requests) == paid_single  # every call asked once, as on one machine
    scripted.requests.clear()

    assert index_path(ray_ctx, dataset).name == index_path(single_ctx, dataset).name  # the same index id
    for table in SCHEMAS:
        pd.testing.assert_frame_equal(getattr(on_ray, table), getattr(single, table), obj=table)
    for attribute, _ in EMBEDDINGS.values():
        np.testing.assert_allclose(getattr(on_ray, attribute), getattr(single, attribute), rtol=0, atol=1e-6)
    ours, theirs = single.manifest, on_ray.manifest
    assert untimed_ledger(theirs) == untimed_ledger(ours)  # calls and tokens per stage, counted once
    assert [s["stage"] for s in theirs["stages"]] == [s["stage"] for s in ours["stages"]]
    assert [(s["calls"], s["live_calls"]) for s in theirs["stages"]] == [
        (s["calls"], s["live_calls"]) for s in ours["stages"]
    ]
    assert (ray_ctx.ledger.frame()["kind"] != "embedding").sum() == sum(paid_single.values()) - sum(
        n for key, n in paid_single.items() if key.startswith("/v1/embeddings")
    )  # the tasks' rows are in the run's ledger
    written = read_ledger(ray_ctx.ledger.path)  # the tasks appended theirs as their calls happened
    assert len(written) == len(ray_ctx.ledger.frame()) == len(read_ledger(single_ctx.ledger.path))

    assert "distributed" not in ours
    distributed = theirs["distributed"]
    assert distributed["address"] == cluster.address and len(distributed["cluster_nodes"]) == 2
    stages = distributed["stages"]
    assert set(stages) == {"chunk", "extract_nlp", "extract_llm", "embeddings"}
    assert stages["chunk"]["tasks"] == stages["extract_nlp"]["tasks"] == stages["extract_llm"]["tasks"] == 2
    assert all(len(stages[s]["nodes"]) == 2 for s in ("chunk", "extract_nlp", "extract_llm"))  # both nodes

    # a rebuild on the cluster (the index folder gone, the run's cache kept) replays every call
    shutil.rmtree(index_path(ray_ctx, dataset))
    again_ctx = context(scripted.base_url, tmp_path / "ray", "again")
    again = build_index(again_ctx, dataset)
    assert scripted.requests == []
    assert again_ctx.ledger.frame()["cached"].astype(bool).all()
    for table in SCHEMAS:
        pd.testing.assert_frame_equal(getattr(again, table), getattr(single, table), obj=table)


def test_a_stages_tasks_are_dealt_to_the_nodes_cpus_in_turn():
    """One task per node before any node gets a second; a node's share follows its CPUs; a head node
    without CPUs gets none unless no node has one.
    """
    from ragtrial.index.distribute import dealt_nodes

    assert dealt_nodes({"b": 1, "a": 1}, 2) == ["a", "b"]
    assert dealt_nodes({"a": 1, "b": 1}, 5) == ["a", "b", "a", "b", "a"]
    assert dealt_nodes({"a": 3, "b": 1, "head": 0}, 4) == ["a", "b", "a", "a"]
    assert dealt_nodes({"head": 0, "other": 0}, 3) == ["head", "other", "head"]
    assert dealt_nodes({"a": 2}, 0) == []


def test_without_the_address_a_build_imports_nothing_of_ray(scripted, tmp_path):
    settings = endpoint_settings(
        scripted.base_url, tmp_path, data={"size": "tiny"}, index={"graph_source": "nlp", "reports": "none"}
    )
    script = (
        "import json, sys; from ragtrial.runner.context import open_run; "
        "from ragtrial.data.experiment_dataset import load_experiment_dataset; "
        "from ragtrial.index.build import build_index; "
        f"ctx = open_run(json.loads({json.dumps(json.dumps(settings))}), {str(tmp_path / 'run')!r}); "
        "index = build_index(ctx, load_experiment_dataset(ctx.settings.data)); "
        "print(len(index.chunks), 'distributed' in index.manifest, 'ray' in sys.modules)"
    )
    environment = {k: v for k, v in os.environ.items() if k != RAY_ADDRESS_ENV}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True, env=environment
    )
    assert done.returncode == 0, done.stderr
    chunks, distributed, ray_imported = done.stdout.split()
    assert int(chunks) > 0 and distributed == ray_imported == "False"


def test_an_address_without_a_cluster_fails_the_build_naming_it(scripted, tmp_path, monkeypatch):
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    monkeypatch.setenv(RAY_ADDRESS_ENV, address)
    ctx = context(scripted.base_url, tmp_path, "unreachable", data={"size": "tiny"})
    dataset = load_experiment_dataset(ctx.settings.data)
    with pytest.raises(ParamsError, match=f"{RAY_ADDRESS_ENV}={address}: cannot connect to a Ray cluster"):
        build_index(ctx, dataset)
    assert scripted.requests == [] and not index_path(ctx, dataset).exists()  # nothing ran on one machine


def test_a_url_with_a_password_is_refused_naming_the_key_not_the_secret(scripted, tmp_path, monkeypatch):
    monkeypatch.setenv(RAY_ADDRESS_ENV, f"127.0.0.1:{free_port()}")
    ctx = context(scripted.base_url, tmp_path, "password", data={"size": "tiny"})
    secret_url = "postgresql://ragtrial:s3cret-pass@127.0.0.1:1/study"
    ctx.settings = ctx.settings.model_copy(
        update={"cache": ctx.settings.cache.model_copy(update={"url": secret_url})}
    )
    with pytest.raises(ParamsError, match="key 'cache.url' carries a password") as raised:
        build_index(ctx, load_experiment_dataset(ctx.settings.data))
    assert "s3cret" not in str(raised.value)


def test_a_node_without_the_api_key_fails_the_build_naming_the_variable(
    cluster, scripted, tmp_path, monkeypatch
):
    variable = "RAGTRIAL_INDEX_KEY_UNDER_TEST"  # set here, not where the nodes were started
    monkeypatch.setenv(variable, "sk-test-not-on-the-nodes")
    monkeypatch.setenv(RAY_ADDRESS_ENV, cluster.address)
    ctx = context(scripted.base_url, tmp_path, "no-key", data={"size": "tiny"}, llm={"api_key_env": variable})
    with pytest.raises(RuntimeError, match=f"{variable} not set on Ray node .* where `ray start` runs"):
        build_index(ctx, load_experiment_dataset(ctx.settings.data))
    assert scripted.requests == []
