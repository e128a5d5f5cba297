"""The kit's side of the process boundary (`workers/protocol.py`): start a system's worker, send it
one request at a time, and turn its failures, its death or its silence into an `UpstreamError`
naming the system, the operation and where its log is.
"""

from __future__ import annotations

import itertools
import json
import os
import selectors
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragtrial.methods.upstream.environments import python_for, worker_script

# What a worker inherits: enough to run, nothing secret (the proxy needs no key). Offline: a system
# never reaches a model hub or fetches a price list at run time.
_PASSED = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "RAGTRIAL_SYSTEMS_HOME")
_FIXED = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "OPENAI_API_KEY": "ragtrial-proxy",
    "PYTHONUNBUFFERED": "1",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}


class UpstreamError(RuntimeError):
    """A request the worker failed, or a worker that died or stopped answering."""

    def __init__(self, system: str, op: str, kind: str, message: str, detail: str = ""):
        super().__init__(f"{system} {op}: {kind}: {message}")
        self.system, self.op, self.kind, self.message, self.detail = system, op, kind, message, detail


def worker_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    return {**{k: environ[k] for k in _PASSED if k in environ}, **_FIXED}


class Worker:
    """One running worker of `system` in `workdir`; stderr goes to `log_path`. `command` runs
    another worker program than the system's own (any program speaking the protocol).
    """

    def __init__(
        self,
        system: str,
        workdir: Path,
        log_path: Path,
        timeout_s: float,
        install_missing: bool = True,
        command: Sequence[str] | None = None,
    ):
        self.system, self.workdir, self.log_path, self.timeout_s = (
            system,
            Path(workdir),
            Path(log_path),
            timeout_s,
        )
        self.install_missing = install_missing
        self.command = list(command) if command else None
        self.process: subprocess.Popen | None = None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()  # one request at a time: the protocol is a single line stream

    def start(self) -> Worker:
        if self.process is None or self.process.poll() is not None:
            self.workdir.mkdir(parents=True, exist_ok=True)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            command = self.command or [
                str(python_for(self.system, install_missing=self.install_missing)),
                str(worker_script(self.system)),
            ]
            with self.log_path.open("ab") as log:
                self.process = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    cwd=self.workdir,
                    env=worker_environment(),
                )
        return self

    def request(self, op: str, timeout_s: float | None = None, **payload: Any) -> dict[str, Any]:
        """The worker's result for `op`; raises UpstreamError on a failure, a death or a timeout."""
        with self._lock:
            self.start()
            assert self.process is not None and self.process.stdin and self.process.stdout
            request_id = next(self._ids)
            try:
                self.process.stdin.write(
                    (json.dumps({"id": request_id, "op": op, **payload}) + "\n").encode()
                )
                self.process.stdin.flush()
            except BrokenPipeError:
                raise self._died(op) from None
            line = self._read_line(op, timeout_s or self.timeout_s)
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            raise UpstreamError(self.system, op, "protocol", f"not a JSON reply: {line[:200]!r}") from None
        if reply.get("id") != request_id:
            raise UpstreamError(
                self.system, op, "protocol", f"reply to request {reply.get('id')}, not {request_id}"
            )
        if not reply.get("ok"):
            error = reply.get("error") or {}
            raise UpstreamError(
                self.system,
                op,
                error.get("type", "error"),
                error.get("message", ""),
                error.get("traceback", ""),
            )
        return reply["result"]

    def _read_line(self, op: str, timeout_s: float) -> str:
        assert self.process is not None and self.process.stdout
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + timeout_s
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.kill()
                    raise UpstreamError(
                        self.system, op, "timeout", f"no reply within {timeout_s:g} s; log: {self.log_path}"
                    )
                if selector.select(min(remaining, 1.0)):
                    line = self.process.stdout.readline()
                    if not line:
                        raise self._died(op)
                    return line.decode()
                if self.process.poll() is not None:
                    raise self._died(op)

    def _died(self, op: str) -> UpstreamError:
        code = self.process.wait() if self.process else None
        tail = self.log_path.read_text(errors="replace")[-2000:] if self.log_path.exists() else ""
        return UpstreamError(self.system, op, "worker_died", f"exit code {code}; log: {self.log_path}", tail)

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def close(self) -> None:
        if self.process and self.process.poll() is None:
            try:
                self.request("shutdown", timeout_s=10)
                self.process.wait(timeout=10)
            except (UpstreamError, subprocess.TimeoutExpired):
                self.kill()
        self.process = None

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
