"""The Ray engine of `ragtrial run --engine ray [--address A]`: each run of the batch is a Ray task that
calls `runner.execute.execute_run` on a node of the cluster (papermill, the notebook in a kernel of its
own, as on one machine), so the run folder, `run.json`, the report and the outputs index are written
as the threaded runner writes them, and the batch logs the same lines and ends with the same table.
This module is imported only for `--engine ray`.

- Where: `address` as Ray takes it: "auto" (the cluster `ray start` started on this machine),
  "host:port" (a cluster's GCS), "ray://host:port" (Ray Client); none: $RAY_ADDRESS, else a cluster
  running here, else a single-node Ray started for the batch. Every node must see the project root,
  the outputs folder (with the cache and indexes under it) and the data root at the same paths, and
  have the kit installed.
- Order: a run starts once the runs it waits for have ended (`runner.schedule.run_waits`): the runs of
  one identity (data set, model and index) one after the other, in batch order, as the threaded
  runner runs a batch (the first builds the index the others read, a reply one run paid is in the
  cache before the next asks for it), and a notebook that reads its batch's runs (the verdict, the
  comparison, the sweep) after every run before it. Runs of different identities (a grid over data
  sets, models or index settings) run at once, as many as the cluster's free CPUs and memory allow
  (each run's `resources`), spread over its nodes.
- Failures: a run whose worker or node died is run again by Ray (`NODE_FAILURE_RETRIES` times, on a
  node still alive), resuming from the cache as any run that did not complete; an interrupt of the
  batch (Ctrl-C, SIGTERM) cancels every run, and those running record `interrupted`.
- Secrets: no API key travels. A kernel reads its keys from its node's environment (set them where
  `ray start` runs); a run whose node lacks a key variable set here fails, naming the variable. A URL
  with a password is refused before any run: task arguments are kept in the cluster's object store.
  The non-secret variables the kernels read (`index.distribute.FORWARDED`) are set in the tasks as
  they are here.
- Index builds: a kernel's `RAGTRIAL_RAY_ADDRESS` is the cluster's address, so the corpus-scale stages
  of the index it builds run as Ray tasks on the cluster (`index.distribute`).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ragtrial.config.base import ParamsError
from ragtrial.config.batch import RunSpec
from ragtrial.index.build import RAY_ADDRESS_ENV
from ragtrial.index.distribute import FORWARDED, connect, forward, missing_keys
from ragtrial.redact import password_key, redact
from ragtrial.runner.checks import run_folder
from ragtrial.runner.context import secret_variables
from ragtrial.runner.execute import RunResult, execute_run, record_interruption
from ragtrial.runner.recorder import BatchRecorder
from ragtrial.runner.schedule import run_waits

NODE_FAILURE_RETRIES = 3
POLL_S = 0.25  # how often the driver reads the runs' notices while waiting for a result
CANCEL_WAIT_S = 60.0  # how long an interrupted batch waits for its running runs to record it
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
    The notices are awaited, so the driver has each one before the result it precedes. The kernel
    finds the cluster's address in `RAY_ADDRESS_ENV`, for the index stages it runs on the cluster.
    """
    forward(environment)
    context = ray.get_runtime_context()
    os.environ[RAY_ADDRESS_ENV] = context.gcs_address
    node = context.get_node_id()
    ray.get(notices.note.remote(position, PICKED, node))
    reason = missing_keys(key_variables, node)
    if reason:
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
        key = password_key(spec.settings.model_dump(mode="json"))
        if key:
            raise ParamsError(
                f"{spec.source}: key '{key}' carries a password in its URL; the Ray engine keeps a "
                "run's settings in the cluster's object store, so give it through the environment "
                "(llm.api_key_env, cache.password_env) or run without --engine ray"
            )


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
    connected = connect(address, f"--address {address}")
    environment = {name: os.environ[name] for name in FORWARDED if name in os.environ}
    try:
        here = ray.get_runtime_context().get_node_id()
        # ray.remote turns the class into an actor class; its stubs type the decorated class as the plain one
        notices = Notices.options(  # type: ignore[attr-defined]
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)
        ).remote()
        waits = run_waits(specs, one_machine=False)  # 0-based positions, as `ended` holds them
        submitted: set[int] = set()
        ended: set[int] = set()
        running: dict[Any, int] = {}

        def submit_ready() -> None:
            for i in range(1, len(specs) + 1):
                if i not in submitted and waits[i - 1] <= ended:
                    submitted.add(i)
                    submit(i)

        def submit(i: int) -> None:
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
            running[ref] = i

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

        submit_ready()
        results: dict[int, RunResult] = {}
        try:
            while running:
                ready, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
                take_notices()
                for ref in ready:
                    i = running.pop(ref)
                    result, seconds = _result(ref, specs[i - 1], outputs)
                    recorder.finished(i, result, seconds)
                    results[i] = result
                    ended.add(i - 1)
                if ready:
                    submit_ready()
        except KeyboardInterrupt:
            for ref in running:
                ray.cancel(ref)
            ray.wait(list(running), num_returns=len(running), timeout=CANCEL_WAIT_S)
            for i in running.values():
                record_interruption(run_folder(outputs, specs[i - 1].run_id))
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
