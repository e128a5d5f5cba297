"""The two test tiers: tests/conftest.py marks a test `slow` from the fixtures it uses (`make test-fast`
runs the others), and refuses a fast test that starts a kernel, the embedded model or a real system.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import PROJECT_ROOT, SLOW_FIXTURES

from ragtrial.config.llm import LLMSettings
from ragtrial.llm.server import EmbeddedServer
from ragtrial.methods.upstream.boundary import Worker

# a test of each: a fixture's own server, one reached through another fixture, a parameter's
FILES = ["tests/llm/test_cache_backends.py", "tests/runner/test_postgres_cache_run.py"]


def test_the_tests_of_a_postgresql_server_are_slow_and_their_sqlite_twins_fast():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "slow",
            *FILES,
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    slow = {line for line in done.stdout.splitlines() if "::" in line}
    backends = "tests/llm/test_cache_backends.py::"
    assert f"{backends}test_the_password_may_come_from_the_environment_only" in slow  # postgres_server
    assert f"{backends}test_a_connection_the_server_dropped_is_replaced" in slow  # through postgres_url
    run = "tests/runner/test_postgres_cache_run.py::test_a_second_run_replays_from_the_postgresql_cache"
    assert f"{run}_with_no_live_call" in slow
    twins = f"{backends}test_a_stored_failure_is_replaced_by_a_later_success_whole"
    assert f"{twins}[postgresql]" in slow and f"{twins}[sqlite]" not in slow  # cache_location's parameter
    assert not any("test_an_unknown_scheme_or_a_bare_path_is_refused" in test for test in slow)
    assert re.search(r"\d+ deselected", done.stdout)  # the fast ones, collected and left out


def test_a_test_without_a_slow_fixture_is_in_the_fast_tier(request):
    """So the fast tier is never empty: no slow fixture is autouse, and this test is fast."""
    assert not SLOW_FIXTURES.keys() & set(request.node.fixturenames)
    assert request.node.get_closest_marker("slow") is None


def test_a_fast_test_that_starts_a_kernel_fails_naming_the_fixture_to_ask_for():
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3")
    try:
        with pytest.raises(RuntimeError, match="request the `notebook_kernels` fixture"):
            manager.start_kernel()
        assert not manager.has_kernel
    finally:
        manager.cleanup_resources()  # the connection file written before the launch


def test_a_fast_test_that_starts_the_embedded_model_or_a_real_system_fails(tmp_path):
    with pytest.raises(RuntimeError, match="request the `embedded_model` fixture"):
        EmbeddedServer(LLMSettings(), tmp_path / "server.log").start()
    with pytest.raises(RuntimeError, match="request the `upstream_systems` fixture"):
        Worker("lightrag", tmp_path / "work", tmp_path / "worker.log", timeout_s=5).start()
