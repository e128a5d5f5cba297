"""Where the embedded backend finds llama-server, and that a built one is never rebuilt (the real
build runs in the install step that `make test` depends on).
"""

import os
import subprocess

import pytest

from ragtrial.llm import llama_build
from ragtrial.llm.endpoint_probe import EndpointProblem, embedded_parts
from ragtrial.llm.llama_build import SERVER_ENV, build, llama_server_path


def test_the_variable_names_the_binary_else_the_shared_cache_holds_it(monkeypatch):
    monkeypatch.setenv(SERVER_ENV, "/opt/llama/llama-server")
    assert str(llama_server_path()) == "/opt/llama/llama-server"
    monkeypatch.delenv(SERVER_ENV)
    shared = (".cache", "ragtrial", "llama.cpp", llama_build.SOURCE_VERSION, "llama-server")
    assert llama_server_path().parts[-5:] == shared


def test_a_built_server_is_not_built_again(tmp_path, monkeypatch):
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv(SERVER_ENV, str(binary))

    def no_subprocess(*args, **kwargs):
        raise AssertionError(f"ran {args[0]}")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    assert build(["-DGGML_NATIVE=OFF"]) == binary


def test_a_failed_step_names_itself_and_shows_the_tool_s_last_lines(tmp_path, monkeypatch):
    monkeypatch.setenv(SERVER_ENV, str(tmp_path / "missing" / "llama-server"))

    def failing(command, **kwargs):
        return subprocess.CompletedProcess(command, 1, "", "ERROR: no such version\n")

    monkeypatch.setattr(subprocess, "run", failing)
    with pytest.raises(RuntimeError, match=r"the download step failed .*\n.*no such version"):
        build([])
    assert not (tmp_path / "missing").exists()


def test_the_check_names_an_unbuilt_server(tmp_path, monkeypatch):
    monkeypatch.setenv(SERVER_ENV, str(tmp_path / "llama-server"))
    unbuilt = r"key 'llm.backend': embedded needs llama-server, not built at"
    with pytest.raises(EndpointProblem, match=unbuilt):
        embedded_parts()
    (tmp_path / "llama-server").write_text("")
    os.chmod(tmp_path / "llama-server", 0o755)
    assert "llama-server is built" in embedded_parts()
