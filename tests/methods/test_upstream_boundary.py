"""The process boundary to an upstream system's worker: replies, failures, a dead or silent worker,
and what the worker inherits (no secret).
"""

import sys

import pytest
from conftest import PROJECT_ROOT

from ragtrial.methods.upstream.boundary import UpstreamError, Worker

TEST_WORKER = [sys.executable, str(PROJECT_ROOT / "tests" / "upstream_test_worker.py")]


@pytest.fixture
def worker(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGTRIAL_TEST_SECRET", "sk-never-passed")
    w = Worker("test", tmp_path / "work", tmp_path / "worker.log", timeout_s=30, command=TEST_WORKER)
    yield w
    w.close()


def test_a_request_gets_its_result_and_stray_prints_stay_out_of_the_protocol(worker):
    assert worker.request("hello")["system"] == "test"
    result = worker.request("echo", value=[1, "two"])
    assert result["echo"] == [1, "two"] and result["seconds"] >= 0
    assert "stray print" in (worker.log_path).read_text()


def test_the_worker_inherits_no_secret_and_only_the_proxy_placeholder_key(worker):
    result = worker.request("echo", value=None)
    assert result["env_key"] == "ragtrial-proxy" and result["secret_seen"] is False


def test_a_failed_request_names_system_op_and_error_and_the_worker_goes_on(worker):
    with pytest.raises(UpstreamError, match=r"test fail: ValueError: scripted failure") as err:
        worker.request("fail")
    assert "Traceback" in err.value.detail
    assert worker.request("echo", value=1)["echo"] == 1


def test_an_unknown_op_is_an_error_listing_the_known_ones(worker):
    with pytest.raises(UpstreamError, match="unknown op 'nope'; known: die, echo, fail, hang, hello"):
        worker.request("nope")


def test_a_dead_worker_is_an_error_with_its_exit_code_and_log_and_a_new_request_restarts_it(worker):
    with pytest.raises(UpstreamError, match="worker_died: exit code 3") as err:
        worker.request("die")
    assert "dying now" in err.value.detail
    assert worker.request("echo", value=2)["echo"] == 2


def test_a_silent_worker_times_out_and_is_killed(worker):
    with pytest.raises(UpstreamError, match=r"timeout: no reply within 1 s"):
        worker.request("hang", timeout_s=1)
    assert worker.process.poll() is not None
