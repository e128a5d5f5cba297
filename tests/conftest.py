from __future__ import annotations

import json
import os
import subprocess
import sys
import time
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


def batch_sets(params: str | Path) -> dict:
    """What a params file takes from --set: a model endpoint for the paper batches (`paper_*.yaml`,
    backend openai_compatible; the other batches run the embedded model, which refuses one), a
    PostgreSQL database for the stores' batch. Nothing listens at either: the tests that use them
    only resolve and check batches.
    """
    name = Path(params).name
    if name.startswith("paper_"):
        return {"llm": {"base_url": "http://127.0.0.1:1/v1"}}
    if name == "seed_stores.yaml":
        return {"store": {"url": "postgresql://127.0.0.1:1/ragtrial"}}
    return {}


# ---------------------------------------------------------------- the two tiers
# `make test` runs every test; `make test-fast` those not marked `slow`. A test is slow when its fixture
# closure holds one of these fixtures, each standing for something real it starts (seconds to minutes).
SLOW_FIXTURES = {
    "cluster": "a two-node Ray cluster",
    "postgres_server": "a PostgreSQL server",
    "mlflow_server": "an MLflow tracking server",
    "falkordb_url": "a FalkorDB server",
    "embedded_model": "the embedded llama.cpp server",
    "notebook_kernels": "Jupyter kernels (notebooks executed by papermill, batches walked)",
    "upstream_systems": "an upstream system's worker in its own environment",
    "chromium_browser": "headless Chromium",
    "simulation_processes": "a pool of processes simulating hundreds of judge studies (minutes of CPU)",
}


def pytest_collection_modifyitems(items):
    for item in items:
        if SLOW_FIXTURES.keys() & set(item.fixturenames):  # the closure: fixtures of fixtures included
            item.add_marker(pytest.mark.slow)
    # The slow tier first (a stable sort, so each tier keeps its order): the xdist workers pull the next
    # test as each ends, so the long ones start early and the quick ones fill the end. In file order a
    # 100-s test was pulled last and kept one worker busy 75 s after the other had finished.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def refusal(fixture: str):
    def refuse(*args, **kwargs):
        raise RuntimeError(
            f"this test starts {SLOW_FIXTURES[fixture]} without asking for it: request the `{fixture}` "
            "fixture (tests/conftest.py), which puts the test in the slow tier"
        )

    return refuse


def refuse_real_systems(start):
    """`Worker.start` for the tests' own worker (a command of its own); refused for a real system's."""

    def guarded(worker):
        return start(worker) if worker.command else refusal("upstream_systems")()

    return guarded


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A test outside the slow tier that starts one of the slow things in this process (its module- and
    session-scoped fixtures included) fails, so a forgotten fixture cannot slow the fast tier unseen.
    What starts in a child process (`python -m ragtrial run`) is not seen: such a test asks itself.
    """
    if item.get_closest_marker("slow"):
        return (yield)
    from jupyter_client.provisioning.local_provisioner import LocalProvisioner

    from ragtrial.llm.server import EmbeddedServer
    from ragtrial.methods.upstream.boundary import Worker

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LocalProvisioner, "launch_kernel", refusal("notebook_kernels"))
        patch.setattr(EmbeddedServer, "start", refusal("embedded_model"))
        patch.setattr(Worker, "start", refuse_real_systems(Worker.start))
        return (yield)


# `RAGTRIAL_TEST_TIMELINE=<folder>`: every test's start and end (seconds since the epoch), one file per
# pytest worker, to see how the suite's time falls on the workers (docs/performance.md).
# The controller hears every worker's tests again: only the workers record.
TIMELINE = os.environ.get("RAGTRIAL_TEST_TIMELINE")
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
started: dict[str, float] = {}


def pytest_runtest_logstart(nodeid, location):
    if TIMELINE and WORKER:
        started[nodeid] = time.time()


def pytest_runtest_logfinish(nodeid, location):
    if nodeid in started:
        Path(TIMELINE).mkdir(parents=True, exist_ok=True)  # a missing folder crashed the worker
        with open(Path(TIMELINE) / f"{WORKER}.tsv", "a") as out:
            out.write(f"{WORKER}\t{nodeid}\t{started.pop(nodeid):.1f}\t{time.time():.1f}\n")


@pytest.fixture(scope="session")
def notebook_kernels():
    """The test executes notebooks in Jupyter kernels (papermill runs, whole batches): 10 s to minutes."""


@pytest.fixture(scope="session")
def simulation_processes():
    """The test simulates hundreds of judge studies in spawned processes (notebook 12's coverage checks)."""


@pytest.fixture(scope="session")
def embedded_model():
    """The test starts the embedded llama.cpp server (Gemma 3 270M), in this process or a child."""


@pytest.fixture(scope="session")
def upstream_systems():
    """The test starts an upstream system's worker (GraphRAG, fast-graphrag, LightRAG) in its environment."""


@pytest.fixture(scope="session")
def chromium_browser() -> str:
    """The path of the machine's Chromium; the test is skipped on a machine without one."""
    from ragtrial.report.screenshots import chromium

    found = chromium()
    if found is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    return found


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
def mlflow_server():
    """The URL of a real MLflow tracking server for the whole session (`mlflow_server.running_mlflow`)."""
    from mlflow_server import running_mlflow

    with running_mlflow() as url:
        yield url


@pytest.fixture(scope="session")
def falkordb_url():
    """A real FalkorDB server for the whole session (`falkordb_server.running_falkordb`), its redis URL."""
    from falkordb_server import running_falkordb

    with running_falkordb() as url:
        yield url


# postgresql: a slow parameter (its server comes through getfixturevalue, outside the fixture closure)
@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
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


def batch_runs(params: str | Path) -> list:
    """The runs of a params file (`params/x.yaml`, from the project root) with their settings
    resolved as `ragtrial run` resolves them, with what it takes from --set (`batch_sets`).
    """
    from ragtrial.config.batch import load_batch

    return load_batch(PROJECT_ROOT / params, batch_sets(params), notebooks_dir=PROJECT_ROOT / "notebooks")[0]


@pytest.fixture
def tiny_qa_batch(scripted, tmp_path, monkeypatch) -> Path:
    """A batch file of notebooks 01 and 04 on the tiny generated corpus against the scripted server."""
    import yaml

    from ragtrial.config.paths import OUTPUTS_ENV

    monkeypatch.delenv(OUTPUTS_ENV, raising=False)  # a command sets it for the run it opens
    scripted.default_reply = cited_answer_reply
    settings = endpoint_settings(
        scripted.base_url,
        tmp_path,
        data={"size": "tiny"},
        index={"graph_source": "nlp", "reports": "none"},
        retrieval={"k": 2},
    )
    path = tmp_path / "batch.yaml"
    runs = [{"notebook": "01_build_index"}, {"notebook": "04_rag_vs_graphrag_qa"}]
    path.write_text(yaml.safe_dump({"settings": settings, "runs": runs}))
    return path


def run_default_notebooks(overrides: dict, folder: Path, *notebooks: str) -> list:
    """`notebooks` of params/default.yaml run with `overrides`, outputs in `folder/out`; each must
    complete.
    """
    from ragtrial.runner.batch import run_batch

    results = run_batch(
        PROJECT_ROOT / "params" / "default.yaml",
        overrides,
        root=PROJECT_ROOT,
        outputs=folder / "out",
        only=list(notebooks),
        log=lambda _: None,
    )
    for result in results:
        assert result.status == "completed", (result.run_id, result.error)
    return results


@pytest.fixture
def unwritable():
    """`unwritable(file)` makes a file no write reaches, root's included: immutable (chattr +i) as
    root, read-only by its mode otherwise; undone after the test so that its folder can be removed.
    """
    made: list[Path] = []

    def make(path: Path) -> None:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "+i", str(path)], check=True)
        else:
            path.chmod(0o444)
        made.append(path)

    yield make
    for path in made:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        else:
            path.chmod(0o644)


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
