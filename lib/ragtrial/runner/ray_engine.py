"""The Ray engine of `ragtrial run --engine ray [--address A]`: each run of the batch is a Ray task that
calls `runner.batch.execute_run` on a node of the cluster (papermill, the notebook in a kernel of its
own, as on one machine), so the run folder, `run.json`, the report and the outputs index are written
as the threaded runner writes them, and the batch logs the same lines and ends with the same table.
This module is imported only for `--engine ray`.

- Where: `address` as Ray takes it: "auto" (the cluster `ray start` started on this machine),
  "host:port" (a cluster's GCS), "ray://host:port" (Ray Client); none: $RAY_ADDRESS, else a cluster
  running here, else a single-node Ray started for the batch. Every node must see the project root,
  the outputs folder (with the cache and indexes under it) and the data root at the same paths, and
  have the kit installed.
- Order: the runs of one identity (data set, model and index: `runner.combined_runs.identity`) run one
  after the other, in batch order, as the threaded runner runs a batch: the first builds the index
  the others read, a reply one run paid is in the cache before the next asks for it, and the verdict
  (10) finds the runs it combines completed. Runs of different identities (a grid over data sets,
  models or index settings) run at once, as many as the cluster's free CPUs and memory allow (each
  run's `resources`), spread over its nodes.
- Failures: a run whose worker or node died is run again by Ray (`NODE_FAILURE_RETRIES` times, on a
  node still alive), resuming from the cache as any run that did not complete; an interrupt of the
  batch (Ctrl-C, SIGTERM) cancels every run, and those running record `interrupted`.
- Secrets: no API key travels. A kernel reads its keys from its node's environment (set them where
  `ray start` runs); a run whose node lacks a key variable set here fails, naming the variable. A URL
  with a password is refused before any run: task arguments are kept in the cluster's object store.
  The non-secret variables the kernels read (`FORWARDED`) are set in the tasks as they are here.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ragtrial.config.base import ParamsError
from ragtrial.config.batch import RunSpec
from ragtrial.config.data import DATA_ROOT_ENV
from ragtrial.llm.middleware import RETRY_FAILURES_ENV
from ragtrial.redact import redact
from ragtrial.runner.batch import BatchRecorder, RunResult, execute_run
from ragtrial.runner.checks import run_folder
from ragtrial.runner.combined_runs import identity
from ragtrial.runner.context import secret_variables
from ragtrial.runner.credentials import credential_keys

NODE_FAILURE_RETRIES = 3
POLL_S = 0.25  # how often the driver reads the runs' notices while waiting for a result
CANCEL_WAIT_S = 60.0  # how long an interrupted batch waits for its running runs to record it
# What the kernels read from their environment besides the API keys (none of it secret).
FORWARDED = (
    DATA_ROOT_ENV,
    RETRY_FAILURES_ENV,
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "RAGTRIAL_SYSTEMS_HOME",
)
PICKED, STARTED = "picked", "started"


@ray.remote(num_cpus=0)
class Notices:
    """Where the tasks say that a run was picked up and that it started, until the driver takes them.
    It lives on the driver's node (placed there, not just preferred: a worker node may die mid-batch).
    """

    def __init__(self) -> None:
        self.notices: list[tuple[int, str, str]] = []

    def note(self, position: int, event: str, node: str) -> None:
        self.notices.append((position, event, node))

    def take(self) -> list[tuple[int, str, str]]:
        taken, self.notices = self.notices, []
        return taken


@ray.remote(max_retries=NODE_FAILURE_RETRIES)
def run_notebook(
    position: int,
    spec: RunSpec,
    root: Path,
    outputs: Path,
    options: dict[str, Any],
    command: str,
    environment: dict[str, str],
    key_variables: list[str],
    notices: Any,
) -> tuple[RunResult, float]:
    """One run on this node: `execute_run` and its wall time. `environment` is the driver's value of
    each `FORWARDED` variable it has (the others are unset here: a worker serves one batch's tasks).
    The notices are awaited, so the driver has each one before the result it precedes.
    """
    for name in FORWARDED:
        if name in environment:
            os.environ[name] = environment[name]
        else:
            os.environ.pop(name, None)
    node = ray.get_runtime_context().get_node_id()
    ray.get(notices.note.remote(position, PICKED, node))
    missing = [name for name in key_variables if not os.environ.get(name)]
    if missing:
        reason = (
            f"{', '.join(missing)} not set on Ray node {node}: a node reads the API keys from its own "
            "environment; set them where `ray start` runs on it"
        )
        return RunResult(
            spec.run_id, spec.notebook, "failed", run_folder(outputs, spec.run_id), {}, reason
        ), 0.0
    started = time.perf_counter()
    result = execute_run(
        spec,
        root,
        outputs,
        **options,
        command=command,
        on_start=lambda run_dir: ray.get(notices.note.remote(position, STARTED, node)),
    )
    return result, time.perf_counter() - started


def refuse_url_passwords(specs: list[RunSpec]) -> None:
    """ParamsError naming the first setting whose URL carries a password (a user name alone is no
    secret: `cache.url: postgresql://ragtrial@host/db` with the password in `cache.password_env`).
    """
    for spec in specs:
        for key, value in credential_keys(spec.settings.model_dump(mode="json")).items():
            if urlsplit(value).password:
                raise ParamsError(
                    f"{spec.source}: key '{key}' carries a password in its URL; the Ray engine keeps a "
                    "run's settings in the cluster's object store, so give it through the environment "
                    "(llm.api_key_env, cache.password_env) or run without --engine ray"
                )


def chain_key(spec: RunSpec) -> str:
    """The runs that share an index, cached replies or each other's tables: one identity."""
    return json.dumps(identity(spec.settings.model_dump(mode="json")), sort_keys=True, default=str)


def connect(address: str | None) -> bool:
    """Connect this process to the cluster (unless it is already); whether it connected here."""
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # the kit calls no service it was not told of
    # Ray's own SIGTERM handler ends the process; the command's stops the batch as Ctrl-C does
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        # the nodes' own logs stay in their Ray log folders; the batch's terminal shows the kit's lines
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, ValueError) as err:  # no cluster there; a ray:// address without ray[client]
        raise ParamsError(f"--address {address}: cannot connect to a Ray cluster there: {err}") from None
    if threading.current_thread() is threading.main_thread():
        for number, handler in handlers.items():
            if handler is not None:
                signal.signal(number, handler)
    return True


def run_on_ray(
    specs: list[RunSpec],
    recorder: BatchRecorder,
    address: str | None,
    root: Path,
    outputs: Path,
    options: dict[str, Any],
) -> list[RunResult]:
    """Execute the runs as Ray tasks (see the module's notes); the results in batch order."""
    refuse_url_passwords(specs)
    connected = connect(address)
    environment = {name: os.environ[name] for name in FORWARDED if name in os.environ}
    try:
        here = ray.get_runtime_context().get_node_id()
        notices = Notices.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)
        ).remote()
        chains: dict[str, deque[int]] = {}
        for i, spec in enumerate(specs, start=1):
            chains.setdefault(chain_key(spec), deque()).append(i)
        running: dict[Any, tuple[int, str]] = {}

        def submit(key: str) -> None:
            i = chains[key].popleft()
            spec = specs[i - 1]
            secrets = secret_variables(spec.settings)
            resources = {"num_cpus": spec.resources.num_cpus}
            if spec.resources.memory:
                resources["memory"] = spec.resources.memory
            ref = run_notebook.options(**resources, scheduling_strategy="SPREAD").remote(
                i,
                spec,
                root,
                outputs,
                options,
                redact(" ".join(sys.argv), secrets),
                environment,
                [name for name in secrets if os.environ.get(name)],
                notices,
            )
            running[ref] = (i, key)

        addresses: dict[str, str] = {}

        def node_name(node: str) -> str:
            if node not in addresses:  # a node that joined since
                addresses.update({n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()})
            return f"{addresses.get(node, 'unknown')} {node[:8]}"

        def take_notices() -> None:
            for i, event, node in ray.get(notices.take.remote()):
                if event == PICKED:
                    recorder.picked(i, f" (on node {node_name(node)})")
                else:
                    recorder.started(i, run_folder(outputs, specs[i - 1].run_id))

        for key in chains:
            submit(key)
        results: dict[int, RunResult] = {}
        try:
            while running:
                ready, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
                take_notices()
                for ref in ready:
                    i, key = running.pop(ref)
                    result, seconds = _result(ref, specs[i - 1], outputs)
                    recorder.finished(i, result, seconds)
                    results[i] = result
                    if chains[key]:
                        submit(key)
        except KeyboardInterrupt:
            for ref in running:
                ray.cancel(ref)
            ray.wait(list(running), num_returns=len(running), timeout=CANCEL_WAIT_S)
            raise
        return [results[i] for i in range(1, len(specs) + 1)]
    finally:
        if connected:
            ray.shutdown()


def _result(ref: Any, spec: RunSpec, outputs: Path) -> tuple[RunResult, float]:
    """The task's result, or a failed run saying why Ray has none (its node died more often than it is
    retried, it ran out of memory, ...); its folder then says what the last attempt left.
    """
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as err:
        reason = " ".join(str(err).split())[:4000]
        return RunResult(
            spec.run_id, spec.notebook, "failed", run_folder(outputs, spec.run_id), {}, reason
        ), 0.0
