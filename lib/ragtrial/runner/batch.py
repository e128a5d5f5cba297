"""A batch: its runs checked, then executed by the thread engine here or the Ray engine
(`runner.ray_engine`, imported only for `--engine ray`); each run is `runner.execute.execute_run`, what
the batch says of them `runner.recorder.BatchRecorder`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ragtrial.config.base import ParamsError
from ragtrial.config.batch import RunSpec
from ragtrial.config.llm import LLMSettings
from ragtrial.config.paths import outputs_dir
from ragtrial.llm.server import batch_server_environment, server_key, stop_embedded
from ragtrial.runner.checks import check_batch
from ragtrial.runner.execute import RunResult, batch_record, execute_run
from ragtrial.runner.progress import POLL_EVERY_S, BatchMonitor
from ragtrial.runner.recorder import BatchRecorder
from ragtrial.runner.schedule import RunQueue, machine_lane, run_waits

ENGINES = ("threads", "ray")
# The log of the embedded server a batch's runs share, in the outputs folder (appended to)
EMBEDDED_SERVER_LOG = "embedded_server.log"


class BatchServers:
    """The embedded servers a batch on this machine shares among its runs, one per server settings
    (`llm.server.server_key`): each is started by the first run that may call it, handed to every
    such run's kernel (`llm.server.BATCH_SERVERS_ENV`), and stopped with the batch. Runs that send at
    once fill one server's slots together instead of splitting the cores between servers, and later
    runs find the shared prompt prefixes in its cache. A server that fails to start is logged, and each
    run then starts its own, failing with its own one-line reason if it cannot.
    """

    def __init__(self, outputs: Path, log: Callable[[str], None]):
        self.log_path = outputs / EMBEDDED_SERVER_LOG
        self.log = log
        self.started: dict[str, LLMSettings] = {}

    def environment(self, spec: RunSpec) -> dict[str, str]:
        """The kernel variables for `spec`: none for a run against an endpoint or one that calls no model."""
        if machine_lane(spec) != "embedded model":
            return {}
        llm = spec.settings.llm
        try:
            environment = batch_server_environment(llm, self.log_path)
        except (RuntimeError, OSError) as err:  # TimeoutError is an OSError
            self.log(f"the batch's embedded server did not start ({err}); {spec.run_id} starts its own")
            return {}
        self.started[server_key(llm)] = llm
        return environment

    def stop(self) -> None:
        for llm in self.started.values():
            stop_embedded(llm)
        self.started.clear()


def _ray_engine():
    """`runner.ray_engine`, imported only for `--engine ray` (so only then is Ray)."""
    try:
        from ragtrial.runner import ray_engine
    except ImportError as err:
        if err.name != "ray":
            raise
        raise ParamsError(
            "--engine ray: Ray is not installed here; install it with `pip install 'ragtrial[ray]'` "
            "(ray 2.60.0)"
        ) from None
    return ray_engine


def _on_threads(specs: list[RunSpec], n_workers: int, one: Callable[[int], RunResult]) -> list[RunResult]:
    """The runs on `n_workers` threads, each starting once the runs it waits for have ended
    (`runner.schedule`); the results in batch order. An interrupt starts no further run and waits for
    the running ones.
    """
    queue = RunQueue(run_waits(specs, one_machine=True))
    results: dict[int, RunResult] = {}

    def work() -> None:
        while (i := queue.take()) is not None:
            try:
                results[i + 1] = one(i + 1)
            finally:
                queue.end(i)

    with ThreadPoolExecutor(max_workers=n_workers) as pool:
        running = [pool.submit(work) for _ in range(n_workers)]
        try:
            for future in running:
                future.result()
        except BaseException:
            queue.stop()
            raise
    return [results[i] for i in range(1, len(specs) + 1)]


def run_batch(
    batch_path: str | Path,
    overrides: dict[str, Any] | None = None,
    root: str | Path = ".",
    outputs: str | Path | None = None,
    only: list[str] | None = None,
    force: bool = False,
    workers: int | None = None,
    show_code: bool = False,
    log=print,
    progress_every_s: float = POLL_EVERY_S,
    engine: str = "threads",
    address: str | None = None,
    mlflow: str | None = None,
) -> list[RunResult]:
    """Check the batch first (`runner.checks.check_batch`, the checks `ragtrial check` makes without
    its reads of data and requests: no model call before them), then execute its runs, logging each
    running run's progress every `progress_every_s` (`runner.progress`) and, at the end, a table of
    the runs. `engine` "threads" runs `workers` at a time in this process; "ray" runs each as a task
    on the Ray cluster at `address` (`runner.ray_engine`, imported only then). With `mlflow` (a tracking
    URI; "" for `mlflow_export.default_tracking_uri`) each completed run is exported as it ends, the
    tracking store checked before the first run (`runner.mlflow_export`, imported only then).
    """
    if engine not in ENGINES:
        raise ParamsError(f"--engine {engine}: one of {', '.join(ENGINES)}")
    if workers is not None and workers < 1:
        raise ParamsError(f"--workers {workers}: must be at least 1")
    if engine == "ray" and workers is not None:
        raise ParamsError(
            f"--workers {workers}: the Ray engine runs as many runs at once as the cluster's free resources "
            "allow; set each run's share with `resources` in the batch file"
        )
    if engine != "ray" and address:
        raise ParamsError(f"--address {address}: an address of a Ray cluster, for --engine ray")
    root = Path(root).resolve()
    outputs = outputs_dir(root, outputs)
    checked = check_batch(batch_path, overrides, root, outputs, only)
    batch = batch_record(batch_path, root, checked.specs)
    specs, batch_workers = checked.selected, checked.workers
    outputs.mkdir(parents=True, exist_ok=True)
    export = None
    if mlflow is not None:
        from ragtrial.runner.mlflow_export import MlflowExport, default_tracking_uri

        export = MlflowExport(mlflow or default_tracking_uri(outputs)).export_finished
    # execute_run's, for every run
    options: dict[str, Any] = {"force": force, "show_code": show_code, "batch": batch}
    batch_started = time.perf_counter()
    servers = BatchServers(outputs, log)
    with BatchMonitor(log, progress_every_s) as monitor:
        recorder = BatchRecorder(specs, outputs, log, monitor, export)

        def one(i: int) -> RunResult:
            started = time.perf_counter()
            recorder.picked(i)
            try:
                result = execute_run(
                    specs[i - 1],
                    root,
                    outputs,
                    **options,
                    on_start=lambda run_dir: recorder.started(i, run_dir),
                    kernel_environment=lambda: servers.environment(specs[i - 1]),
                )
            finally:
                monitor.finished(specs[i - 1].run_id)
            recorder.finished(i, result, time.perf_counter() - started)
            return result

        n_workers = workers if workers is not None else batch_workers
        try:
            if engine == "ray":
                results = _ray_engine().run_on_ray(specs, recorder, address, root, outputs, options)
            elif n_workers == 1:  # in this thread, so an interrupt stops the running notebook at once
                results = [one(i) for i in range(1, len(specs) + 1)]
            else:
                results = _on_threads(specs, n_workers, one)
        finally:
            servers.stop()
            recorder.index()
    for line in recorder.summary(time.perf_counter() - batch_started):
        log(line)
    return results
