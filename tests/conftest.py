from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))  # tests import scripted_server as a plain module

from scripted_server import ScriptedServer  # noqa: E402

from ragtrial.config.llm import LLMSettings  # noqa: E402
from ragtrial.llm.cache import ResponseCache  # noqa: E402
from ragtrial.llm.client import LLM  # noqa: E402
from ragtrial.llm.ledger import Ledger  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATASETS = PROJECT_ROOT.parent / "shared" / "datasets"
# The params files name data-set folders under the data root; on this machine kind they sit beside
# the project (a run's notebook kernels inherit the variable).
os.environ.setdefault("RAGTRIAL_DATA_ROOT", str(SHARED_DATASETS))
# What the batches take from --set: a model endpoint (the paper batches), a PostgreSQL database (the
# stores' batch). Nothing listens at either: the tests that use them only resolve and check batches.
BATCH_SETS = {
    "llm": {"base_url": "http://127.0.0.1:1/v1"},
    "store": {"url": "postgresql://127.0.0.1:1/ragtrial"},
}


@pytest.fixture
def scripted():
    with ScriptedServer() as server:
        yield server


@pytest.fixture(scope="session")
def cluster():
    """One real two-node Ray cluster on loopback for the session (its start costs ~15 s): the index
    build's and the engine's tests share it; the engine's node-kill test, the last to use it, kills
    its worker node.
    """
    from ray_cluster import LocalRayCluster

    with LocalRayCluster(nodes=2, cpus_per_node=1) as started:
        yield started


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server for the whole session (`postgres_server.running_postgres`); fails,
    never skips, on a machine without PostgreSQL.
    """
    from postgres_server import running_postgres

    with running_postgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server) -> str:
    """The URL of a fresh, empty database on the session's PostgreSQL server."""
    return postgres_server.create_database()


@pytest.fixture(scope="session")
def falkordb_url():
    """A real FalkorDB server for the whole session (`falkordb_server.running_falkordb`), its redis URL."""
    from falkordb_server import running_falkordb

    with running_falkordb() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def cache_location(request, tmp_path) -> str | Path:
    """A fresh response cache's location on each backend: a SQLite file, a PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "cache.sqlite"
    return request.getfixturevalue("postgres_url")


def endpoint_settings(base_url: str, folder: Path, **sections) -> dict:
    """Run settings against a scripted endpoint (its LLM and embeddings), with the cache and the
    index store in `folder`; `sections` are merged in (`llm={...}`, `index={...}`, `data={...}`).
    """
    from ragtrial.config.batch import deep_merge

    base = {
        "llm": {"backend": "openai_compatible", "base_url": base_url, "model": "scripted"},
        "embeddings": {"backend": "openai_compatible", "base_url": base_url, "model": "emb"},
        "cache": {"url": f"sqlite:///{folder / 'cache.sqlite'}"},
        "index": {"store_path": str(folder / "indexes")},
    }
    return deep_merge(base, sections)


def make_llm(base_url: str, tmp_path: Path, cache: str | Path | None = None, **settings) -> LLM:
    """An LLM against `base_url` with fast backoff, its own ledger and the cache at `cache` (default:
    `tmp_path/cache.sqlite`).
    """
    values = {
        "backend": "openai_compatible",
        "base_url": base_url,
        "model": "scripted",
        "backoff_initial_s": 0.01,
        "backoff_max_s": 0.05,
        "timeout_s": 2.0,
        "fold_system": False,
    }
    values.update(settings)
    cfg = LLMSettings(**values)
    return LLM(
        cfg,
        ResponseCache(tmp_path / "cache.sqlite" if cache is None else cache),
        Ledger("test-run", tmp_path / "ledger.csv"),
        lambda: cfg.base_url,
    )


@pytest.fixture(scope="session", autouse=True)
def no_orphan_model_server():
    """Every embedded server a test started in this process is stopped by the end of the session."""
    yield
    from ragtrial.llm.server import _servers, stop_all

    running = [s for s in _servers.values() if s.process is not None and s.process.poll() is None]
    stop_all()
    assert not running, f"{len(running)} embedded server(s) were left running by the tests"


def cited_answer_reply(body: dict) -> str:
    """A scripted reply for the answering notebooks: answers cite entry 1; the key-fact judge says
    every fact is present.
    """
    schema = (body.get("response_format") or {}).get("schema") or (
        (body.get("response_format") or {}).get("json_schema") or {}
    ).get("schema")
    if schema and "present" in schema.get("properties", {}):
        return json.dumps({"present": [True] * schema["properties"]["present"]["minItems"]})
    return "Alvor [1]"
