"""The embedded server's address is the kit's alone: no environment variable can move it, and a
server found listening anywhere but 127.0.0.1 is refused (fast checks; the real server is in
test_embedded.py).
"""

import subprocess
import sys
from contextlib import contextmanager

import pytest

from ragtrial.llm.server import listening_addresses, server_environment, verify_loopback_only

pytestmark = pytest.mark.fault


def test_the_server_environment_drops_every_variable_llama_cpp_reads_settings_from():
    environ = {
        "LLAMA_ARG_HOST": "0.0.0.0",
        "llama_arg_port": "8000",
        "LLAMA_API_KEY": "x",
        "LLAMA_SERVER_ROUTER_PORT": "9000",
        "HF_TOKEN": "hf_x",
        "GGML_CPU_DISABLE_FUSION": "1",
        "PATH": "/usr/bin",
        "OMP_WAIT_POLICY": "PASSIVE",
        "OPENAI_API_KEY": "kept: not a llama.cpp setting",
    }
    assert server_environment(environ) == {
        "PATH": "/usr/bin",
        "OMP_WAIT_POLICY": "PASSIVE",
        "OPENAI_API_KEY": "kept: not a llama.cpp setting",
    }


@contextmanager
def listener(host: str, *, grandchild: bool = False):
    """A separate process listening on (host, a free port): yields (pid, port); with `grandchild`,
    the pid is of a process whose child listens (as the watchdog's llama-server does).
    """
    family = "AF_INET6" if ":" in host else "AF_INET"
    code = (
        "import socket, sys\n"
        f"s = socket.socket(socket.{family}); s.bind(({host!r}, 0)); s.listen()\n"
        "print(s.getsockname()[1], flush=True); sys.stdin.read()"
    )
    if grandchild:
        code = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {code!r}])"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        yield proc.pid, int(proc.stdout.readline())
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_server_listening_on_every_interface_is_refused(host):
    with listener(host) as (pid, port):
        assert listening_addresses(pid) == {(host, port)}
        with pytest.raises(RuntimeError, match=f"listens on .*:{port}, not on 127.0.0.1:{port} only"):
            verify_loopback_only(pid, port)


def test_a_server_on_loopback_is_accepted_and_one_on_another_port_refused():
    with listener("127.0.0.1") as (pid, port):
        verify_loopback_only(pid, port)
        with pytest.raises(RuntimeError, match="refusing"):
            verify_loopback_only(pid, port + 1)


def test_a_server_listening_from_a_child_process_is_checked_too():
    with listener("0.0.0.0", grandchild=True) as (pid, port):
        assert listening_addresses(pid) == {("0.0.0.0", port)}
        with pytest.raises(RuntimeError, match="refusing"):
            verify_loopback_only(pid, port)
