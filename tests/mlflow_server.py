"""A real MLflow tracking server for the tests: `running_mlflow()` starts `mlflow server` on 127.0.0.1 on a
free port, with its SQLite store and its artifacts in a fresh temporary folder, waits until its health
check answers, yields its URL, and stops it (its whole process group) afterwards.

The conftest fixture `mlflow_server` (one per session) serves the tests of `ragtrial export mlflow`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from postgres_server import free_port

START_TIMEOUT_S = 180  # its start (imports, SQLite migrations) took 40-73 s on a busy 2-core machine
STOP_TIMEOUT_S = 15


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def running_mlflow() -> Iterator[str]:
    """The URL of a running MLflow server (its store and artifacts in a temporary folder)."""
    with tempfile.TemporaryDirectory(prefix="ragtrial-mlflow-server-") as name:
        folder = Path(name)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port)]
        command += ["--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}"]
        command += ["--artifacts-destination", str(folder / "artifacts"), "--workers", "1"]
        with open(folder / "server.log", "w") as log:
            server = subprocess.Popen(
                command, cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not _healthy(url):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"mlflow server did not answer {url}/health within {START_TIMEOUT_S} s "
                        f"(exit {server.poll()}): {(folder / 'server.log').read_text()[-2000:]}"
                    )
                time.sleep(0.5)
            yield url
        finally:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGTERM)
                try:
                    server.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    os.killpg(server.pid, signal.SIGKILL)
                    server.wait()
