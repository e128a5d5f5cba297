"""The kernel a batch's notebook runs in: what it is started with, and where its own output goes.

- Its environment carries the run's URL credentials (`runner.credentials`), `BATCH_ENV`, which
  keeps progress lines out of the notebook (they go to the run folder's progress file), the
  outputs folder (`config.paths.OUTPUTS_ENV`), where the cache and the indexes go, and what the batch
  adds (the embedded server it shares among its runs, `llm.server.BATCH_SERVERS_ENV`).
- It runs with glibc's malloc limited to `MALLOC_ARENAS` arenas unless the environment sets its
  own: a notebook's dozens of request threads each get an arena of their own by default, and freed
  memory stays in them (issue 36: notebook 07 with 6 trials at paper size peaked at 3,062 MiB with the
  default arenas, 2,329 MiB with 2; the trials' answers it keeps are ~35 MB each).
- It talks to papermill over encrypted sockets (CurveZMQ keys the manager provisions) when the kernel
  declares it supports them, else over local IPC sockets: ipykernel warns on every start over
  unencrypted TCP, and the warning is right.
- Its own stderr (ipykernel's log, and what it prints while shutting down or when interrupted) goes
  to `kernel.log` in the run folder instead of the batch's terminal; what the notebook prints and
  raises is in the executed notebook, as always, and `failure_reason` says in one line why a run
  failed, naming `kernel.log` when the kernel itself failed.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import zmq
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.paths import jupyter_runtime_dir
from jupyter_core.utils import ensure_dir_exists
from traitlets import Dict, Unicode
from traitlets.config import Config

from ragtrial.config.paths import OUTPUTS_ENV
from ragtrial.llm.progress import BATCH_ENV

KERNEL_LOG = "kernel.log"
MALLOC_ARENAS = {"MALLOC_ARENA_MAX": "2"}


class NotebookKernel(AsyncKernelManager):
    """The notebook kernel's manager for `ragtrial run` (see the module's notes)."""

    environment = Dict(
        key_trait=Unicode(), value_trait=Unicode(), config=True, help="variables for the kernel's environment"
    )
    log_file = Unicode("", config=True, help="the file the kernel's stderr goes to")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        spec = self.kernel_spec
        assert spec is not None  # papermill names the notebook's kernel, so its spec is found
        spec.env.update(self.environment)
        declared = spec.metadata.get("supported_encryption") or []
        if zmq.has("curve") and "curve" in declared:
            self.transport_encryption = "auto"
        else:  # the socket files beside the connection files, in the private runtime folder
            self.transport = "ipc"
            runtime = jupyter_runtime_dir()
            ensure_dir_exists(runtime, 0o700)
            self.ip = str(Path(runtime) / f"ragtrial-kernel-{uuid.uuid4().hex[:12]}")

    # AsyncKernelManager's start_kernel is a coroutine; jupyter_client types it as KernelManager's sync one
    async def start_kernel(self, **kw: Any) -> None:  # type: ignore[override]
        if not self.log_file:
            return await super().start_kernel(**kw)
        with Path(self.log_file).open("ab") as log:  # the kernel holds its own copy of the descriptor
            return await super().start_kernel(stderr=log, **kw)


def kernel_options(
    credentials: Mapping[str, str], run_dir: Path, outputs: Path, batch_environment: Mapping[str, str]
) -> dict[str, Any]:
    """The papermill keyword arguments that start the run's kernel as `NotebookKernel`; `outputs` is
    the batch's outputs folder, under which the kernel resolves the settings' `outputs/` paths.
    """
    malloc = {name: value for name, value in MALLOC_ARENAS.items() if name not in os.environ}
    environment = {**malloc, **batch_environment, **credentials, BATCH_ENV: "1", OUTPUTS_ENV: str(outputs)}
    return {
        "kernel_manager_class": NotebookKernel,
        "config": Config(
            {"NotebookKernel": {"environment": environment, "log_file": str(Path(run_dir) / KERNEL_LOG)}}
        ),
    }


def failure_reason(err: BaseException, kernel_log: Path | None = None) -> str:
    """One line saying why a notebook failed: the notebook's own exception, not papermill's wrapper
    (whose own message is a banner line and the whole traceback); for a failure outside the notebook's
    code (a kernel that died), the exception and where the kernel's own output is.
    """
    ename = getattr(err, "ename", None)
    if ename:  # papermill.PapermillExecutionError: the exception raised inside the notebook
        evalue = getattr(err, "evalue", "") or _raised_line(getattr(err, "traceback", None) or [], ename)
        exec_count = getattr(err, "exec_count", None)
        where = f" (notebook cell In [{exec_count}])" if exec_count else ""
        reason = f"{ename}: {evalue}{where}"
    else:
        reason = f"{type(err).__name__}: {err}"
        if kernel_log is not None and kernel_log.is_file() and kernel_log.stat().st_size:
            reason += f" (the kernel's own output: {kernel_log.name} in the run folder)"
    return " ".join(reason.split())[:4000]


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _raised_line(traceback_lines: list[str], ename: str) -> str:
    """The message of the last `<ename>: message` line of a notebook traceback ("" when none)."""
    lines = _ANSI.sub("", "\n".join(traceback_lines)).splitlines()
    for line in reversed(lines):
        if line.startswith(f"{ename}:"):
            return line[len(ename) + 1 :].strip()
    return ""
