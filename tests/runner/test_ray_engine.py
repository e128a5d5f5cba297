"""`ragtrial run --engine ray` on a real two-node Ray cluster on 127.0.0.1 (`tests/ray_cluster.py`, one
CPU a node) against the scripted endpoint: the same runs, tables and calls as the threaded runner
(which imports no Ray), and a worker node killed mid-batch: the batch completes on the node left, and
no call that was answered is paid again.

The cluster is the session's (`conftest.cluster`), shared with the index build's tests as one xdist
group (one worker, collection order); the node-kill test comes last, as it leaves one node.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import PROJECT_ROOT, endpoint_settings
from hostile import written_secrets
from latency_server import schema_reply
from ray_cluster import TEST_KEY_ENV
from run_outputs import TIMING_COLUMNS, run_tables
from scripted_server import ScriptedServer

# one worker runs every test of the session's Ray cluster, in order (Makefile: --dist loadgroup)
pytestmark = pytest.mark.xdist_group("ray_cluster")

# A `ragtrial run` that says whether it imported Ray.
THREADED_WITHOUT_RAY = (
    "import sys; from ragtrial.cli import main; code = main(sys.argv[1:]); "
    "print('ray imported' if 'ray' in sys.modules else 'ray not imported'); sys.exit(code)"
)


def write_batch(folder: Path, runs: list[dict], base_url: str, **sections) -> Path:
    """A batch on the tiny generated corpus whose cache and indexes are the defaults under the outputs
    folder, so `--outputs` keeps the run ids.
    """
    settings = endpoint_settings(base_url, folder, data={"size": "tiny"}, index={"llm_max_chunks": 2})
    del settings["cache"], settings["index"]["store_path"]  # the defaults: outputs/cache, outputs/indexes
    for section, values in sections.items():
        settings[section] = {**settings.get(section, {}), **values}
    path = folder / "batch.yaml"
    path.write_text(yaml.safe_dump({"settings": settings, "runs": runs}))
    return path


def ragtrial_run(
    batch: Path, outputs: Path, *options: str, env: dict | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", THREADED_WITHOUT_RAY, "run", str(batch), "--outputs", str(outputs), *options],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def closing_table(stdout: str, run_dirs: list[Path]) -> list[list[str]]:
    """The rows of the batch's closing table (run, status, calls; the wall time left out)."""
    names = {d.name for d in run_dirs}
    return [
        line.split()[:-1] for line in stdout.splitlines() if line.split()[:1] and line.split()[0] in names
    ][-len(names) :]


def request_keys(requests: list[dict]) -> Counter:
    """The requests by what the cache keys: path and body."""
    return Counter(r["path"] + json.dumps(r["body"], sort_keys=True) for r in requests)


def test_a_batch_on_two_nodes_has_the_threaded_runs_tables_and_calls(cluster, scripted, tmp_path):
    scripted.default_reply = schema_reply
    notebooks = ["01_build_index", "02_question_entity_distribution"]  # 02 reads the index 01 builds
    batch = write_batch(tmp_path, [{"notebook": n} for n in notebooks], scripted.base_url)
    threaded = ragtrial_run(batch, tmp_path / "threaded")
    assert threaded.returncode == 0, threaded.stderr
    assert threaded.stdout.splitlines()[-1] == "ray not imported"
    paid_threaded = request_keys(scripted.requests)
    scripted.requests.clear()

    on_ray = ragtrial_run(batch, tmp_path / "ray", "--engine", "ray", "--address", cluster.address)
    assert on_ray.returncode == 0, on_ray.stderr
    nodes = {line.rsplit("(on node ", 1)[1] for line in on_ray.stdout.splitlines() if "(on node " in line}
    assert len(nodes) == 2  # the runs went to both nodes
    assert request_keys(scripted.requests) == paid_threaded  # each call asked once, as threads ask it

    run_dirs = sorted((tmp_path / "threaded").glob("0*"))
    assert closing_table(on_ray.stdout, run_dirs) == closing_table(threaded.stdout, run_dirs)
    for run_dir in run_dirs:
        twin = tmp_path / "ray" / run_dir.name
        ours, theirs = (json.loads((d / "run.json").read_text()) for d in (run_dir, twin))
        untimed = [{k: v for k, v in r["ledger"].items() if k not in TIMING_COLUMNS} for r in (ours, theirs)]
        assert theirs["status"] == "completed" and untimed[0] == untimed[1]
        assert theirs["command"].endswith(f"--engine ray --address {cluster.address}")  # the driver's
        assert (twin / "report.html").is_file()
        ours_tables, their_tables = run_tables(run_dir), run_tables(twin)
        assert ours_tables.keys() == their_tables.keys()
        for name, frame in ours_tables.items():
            pd.testing.assert_frame_equal(their_tables[name], frame, obj=f"{run_dir.name}/{name}")
    page = (tmp_path / "ray" / "index.html").read_text()
    assert all(d.name in page for d in (tmp_path / "threaded").glob("0*"))
    # the kernel was told the cluster's address: its index build ran its stages as tasks there
    [threaded_index] = (tmp_path / "threaded" / "indexes").glob("*/manifest.json")
    [ray_index] = (tmp_path / "ray" / "indexes").glob("*/manifest.json")
    assert threaded_index.parent.name == ray_index.parent.name  # the same index id
    assert "distributed" not in json.loads(threaded_index.read_text())
    distributed = json.loads(ray_index.read_text())["distributed"]
    assert {"chunk", "extract_nlp", "extract_llm", "embeddings"} <= set(distributed["stages"])


def test_an_api_key_never_travels_a_node_without_it_fails_the_run_naming_the_variable(
    cluster, scripted, tmp_path
):
    key = "sk-test-" + secrets.token_hex(16)
    variable = "RAGTRIAL_SECRET_UNDER_TEST"
    batch = write_batch(
        tmp_path, [{"notebook": "00_backend_check"}], scripted.base_url, llm={"api_key_env": variable}
    )
    done = ragtrial_run(
        batch,
        tmp_path / "out",
        "--engine",
        "ray",
        "--address",
        cluster.address,
        env={**os.environ, variable: key},
    )
    assert done.returncode == 1
    [line] = [line for line in done.stderr.splitlines() if line.startswith("FAILED")]
    assert f"{variable} not set on Ray node" in line and "where `ray start` runs" in line
    assert scripted.requests == []  # nothing was asked without the key
    written = [p for folder in (cluster.folder, tmp_path) for p in folder.rglob("*") if p.is_file()]
    assert [
        p for p in written if key.encode() in p.read_bytes()
    ] == []  # not in Ray's logs or spilled objects


@pytest.mark.fault
def test_a_key_echoed_in_a_200_reply_on_ray_reaches_no_file(cluster, scripted, tmp_path):
    """An endpoint echoing the Authorization header in its replies wrote the key into the cache and
    the run's files on `--engine ray` too.
    """
    scripted.echo_authorization = True
    llm = {"api_key_env": TEST_KEY_ENV}
    batch = write_batch(tmp_path, [{"notebook": "00_backend_check"}], scripted.base_url, llm=llm)
    done = ragtrial_run(
        batch,
        tmp_path / "out",
        "--engine",
        "ray",
        "--address",
        cluster.address,
        env={**os.environ, TEST_KEY_ENV: cluster.test_key},
    )
    assert done.returncode == 0, done.stderr
    assert f"Bearer {cluster.test_key}" in {r["authorization"] for r in scripted.requests}  # sent, echoed
    assert (tmp_path / "out" / "cache" / "ragtrial.sqlite").is_file()
    assert written_secrets(tmp_path, [cluster.test_key]) == {}
    assert cluster.test_key not in done.stdout + done.stderr


def test_runs_on_two_nodes_that_need_one_index_build_it_once_under_its_lock(cluster, scripted, tmp_path):
    # Two models: two identities, so the runs start at once, one on each node; the NLP graph without
    # reports depends on no model, so both need the same index. Its lock is a file lock in the outputs
    # folder both nodes see: one run builds while the other waits, then loads what was built.
    scripted.script.append(("sleep", 15))  # the build's first request: the other run reaches the lock
    runs = [{"notebook": "01_build_index", "settings": {"llm": {"model": model}}} for model in ("m1", "m2")]
    batch = write_batch(
        tmp_path,
        runs,
        scripted.base_url,
        index={"graph_source": "nlp", "reports": "none"},
        llm={"timeout_s": 60},
    )
    done = ragtrial_run(batch, tmp_path / "out", "--engine", "ray", "--address", cluster.address)
    assert done.returncode == 0, done.stderr
    assert (
        len({line.rsplit("(on node ", 1)[1] for line in done.stdout.splitlines() if "(on node " in line}) == 2
    )
    [index] = [p for p in (tmp_path / "out" / "indexes").iterdir() if p.is_dir()]
    builder = json.loads((index / "manifest.json").read_text())["built_by_run"]
    [waiter] = [p for p in (tmp_path / "out").glob("01_build_index-*") if p.name != builder]
    assert "which is building the index" in (waiter / "notebook.ipynb").read_text()
    assert max(request_keys(scripted.requests).values()) == 1  # every embedding asked once


class HeldSecondCall:
    """A scripted reply whose second model call waits until `release`; then it is answered, or, when
    `drop` is set, its connection is closed unanswered (its caller died). `paid` counts the answered
    requests by cache key.
    """

    def __init__(self):
        self.calls, self.reached, self.release, self.drop = 0, threading.Event(), threading.Event(), False
        self.paid: Counter = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> str | None:
        with self.lock:
            self.calls += 1
            held = self.calls == 2
        if held:
            self.reached.set()
            self.release.wait(300)
            if self.drop:
                return None
        self.paid[json.dumps(body, sort_keys=True)] += 1
        return schema_reply(body)


@pytest.mark.fault
def test_a_stopped_batch_on_ray_records_the_interruption_and_resumes_without_paying_twice(cluster, tmp_path):
    with ScriptedServer() as server:
        held = server.default_reply = HeldSecondCall()
        batch = write_batch(tmp_path, [{"notebook": "00_backend_check"}], server.base_url)
        command = [sys.executable, "-m", "ragtrial", "run", str(batch), "--outputs", str(tmp_path / "out")]
        command += ["--engine", "ray", "--address", cluster.address]
        driver = subprocess.Popen(
            command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            assert held.reached.wait(300), "the run never made its second call"
            driver.send_signal(signal.SIGTERM)  # as Ctrl-C or a scheduler's stop
            _, stderr = driver.communicate(timeout=120)
        finally:
            held.drop = True
            held.release.set()
        assert driver.returncode == 130 and "resume" in stderr
        [record] = (tmp_path / "out").glob("00_backend_check-*/run.json")
        run = json.loads(record.read_text())
        assert run["status"] == "interrupted" and run["ledger"]["llm_calls_live"] == 1
        assert "interrupted" in (tmp_path / "out" / "index.html").read_text()
        done = subprocess.run(command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        run = json.loads(record.read_text())
        assert run["status"] == "completed" and run["ledger"]["llm_calls_cached"] == 1  # paid once
        assert max(held.paid.values()) == 1


@pytest.mark.fault
def test_a_killed_worker_node_mid_batch_the_batch_completes_paying_no_answered_call_twice(cluster, tmp_path):
    with ScriptedServer() as first, ScriptedServer() as second:
        servers = {"first": first, "second": second}
        for server in servers.values():
            server.default_reply = HeldSecondCall()
        # two runs of different data sets, so one runs on each node; each asks its own endpoint
        runs = [
            {
                "notebook": "01_build_index",
                "label": name,
                "settings": {"data": {"seed": seed}, "llm": {"base_url": s.base_url}},
            }
            for seed, (name, s) in enumerate(servers.items(), start=1)
        ]
        batch = write_batch(tmp_path, runs, first.base_url, llm={"concurrency": 1})
        command = [sys.executable, "-m", "ragtrial", "run", str(batch), "--outputs", str(tmp_path / "out")]
        driver = subprocess.Popen(
            [*command, "--engine", "ray", "--address", cluster.address],
            cwd=PROJECT_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            for server in servers.values():
                assert server.default_reply.reached.wait(300), "a run never made its second call"
            records = {
                json.loads(path.read_text())["label"]: json.loads(path.read_text())
                for path in (tmp_path / "out").glob("01_build_index-*/run.json")
            }
            on_worker = [label for label, record in records.items() if record["pid"] in cluster.node_pids(1)]
            assert len(on_worker) == 1, records
            [killed] = on_worker
            cluster.kill_node(1)
            # every call in flight at the kill goes unanswered: the index stages' extraction tasks
            # run on either node, so the survivor's held call may have been asked from the dead one
            for server in servers.values():
                server.default_reply.drop = True
        finally:
            for server in servers.values():
                server.default_reply.release.set()
        stdout, stderr = driver.communicate(timeout=600)
        assert driver.returncode == 0, stderr
        for label, server in servers.items():
            reply = server.default_reply
            assert max(reply.paid.values()) == 1, f"{label}: an answered call was asked again"
            asked = request_keys(server.chat_requests())
            twice = [key for key, n in asked.items() if n > 1]
            assert len(twice) == 1  # the call in flight at the kill, unanswered, asked again
    results = {
        json.loads(p.read_text())["label"]: json.loads(p.read_text())
        for p in (tmp_path / "out").glob("01_build_index-*/run.json")
    }
    assert {label: r["status"] for label, r in results.items()} == {
        "first": "completed",
        "second": "completed",
    }
    [attempt] = results[killed]["attempts"]
    assert attempt["status"] == "killed" and attempt["ledger"]["llm_calls_live"] == 1
    assert results[killed]["ledger"]["llm_calls_cached"] == 1  # what the killed attempt paid, replayed
    survivor = next(label for label in results if label != killed)
    assert results[survivor]["attempts"] == []
    assert "2 completed" in stdout
