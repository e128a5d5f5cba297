"""The real embedded default: llama.cpp serving Gemma 3 270M, started and stopped by the kit."""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from pydantic import BaseModel

from ragtrial.config.llm import LLMSettings
from ragtrial.llm.cache import ResponseCache
from ragtrial.llm.client import LLM
from ragtrial.llm.errors import StructuredOutputError
from ragtrial.llm.ledger import Ledger
from ragtrial.llm.server import EmbeddedServer, listening_addresses

pytestmark = pytest.mark.usefixtures("embedded_model")


class Capital(BaseModel):
    city: str
    continent: str


def test_embedded_server_answers_and_stops(tmp_path):
    settings = LLMSettings()
    server = EmbeddedServer(settings, tmp_path / "server.log")
    base_url = server.start()
    try:
        llm = LLM(settings, ResponseCache(tmp_path / "c.sqlite"), Ledger("t"), lambda: base_url)
        done = llm.complete("The capital of France is", stage="t", max_tokens=12)
        assert done.completion_tokens > 0 and done.prompt_tokens > 0 and not done.cached
        try:
            answer = llm.structured(
                "Capital of Japan and its continent, as JSON.", Capital, stage="t", max_tokens=48
            )
            assert isinstance(answer.city, str)
        except StructuredOutputError:
            pass  # a weak model may fail twice; the failure must then be in the ledger
        ledger = llm.ledger.frame()
        assert len(ledger) == 2 and ledger.loc[1, "failure"] in ("", "parse")
        process = server.process
    finally:
        server.stop()
    assert process.poll() is not None  # no orphan


def test_chat_messages_reach_the_model_through_the_gemma_template(tmp_path):
    """The bundled GGUF has no chat template: the server renders chat with llama.cpp's built-in gemma
    template (a system message merged into the user turn), not with the template's name read as Jinja.
    """
    settings = LLMSettings(fold_system=False)
    server = EmbeddedServer(settings, tmp_path / "server.log")
    base_url = server.start()
    try:
        llm = LLM(settings, ResponseCache(tmp_path / "c.sqlite"), Ledger("t"), lambda: base_url)
        system, user = "Reply in JSON with the city and its continent.", "The capital of Japan."
        with contextlib.suppress(StructuredOutputError):
            llm.structured(
                [{"role": "system", "content": system}, {"role": "user", "content": user}],
                Capital,
                stage="t",
                max_tokens=32,
            )
    finally:
        server.stop()
    turn_markup = len("<start_of_turn>user\n<end_of_turn>\n<start_of_turn>model\n".split())
    assert llm.ledger.frame().loc[0, "prompt_tokens"] > len(f"{system} {user}".split()) + turn_markup


def test_the_server_computes_requests_at_once_in_its_slots(tmp_path):
    """Four requests sent at once overlap on the server: a slot starts a task before another slot's
    task has ended (read from the server's own log).
    """
    settings = LLMSettings()
    assert settings.in_flight == settings.embedded.parallel == 8
    server = EmbeddedServer(settings, tmp_path / "server.log")
    base_url = server.start()
    try:
        llm = LLM(settings, ResponseCache(tmp_path / "c.sqlite"), Ledger("t"), lambda: base_url)
        prompts = [f"Count from {n} to {n + 20}:" for n in range(4)]
        llm.fan_out(lambda prompt: llm.complete(prompt, stage="t", max_tokens=24), prompts, label="t")
    finally:
        server.stop()
    log = (tmp_path / "server.log").read_text(errors="replace")
    started = re.findall(r"^(\S+) I slot launch_slot_: id +(\d+) \| task (\d+)", log, re.MULTILINE)
    ended = {task: at for at, task in re.findall(r"^(\S+) I slot +release: id +\d+ \| task (\d+)", log, re.M)}
    spans = sorted((_log_time(at), _log_time(ended[task])) for at, _slot, task in started if task in ended)
    assert len(spans) == 4
    assert any(later_start < end for (_, end), (later_start, _) in zip(spans, spans[1:], strict=False))
    assert len({slot for _, slot, _ in started}) > 1


def _log_time(stamp: str) -> tuple[int, ...]:
    """llama.cpp's log time stamp (minutes.seconds.milliseconds.microseconds since start)."""
    return tuple(int(part) for part in stamp.split("."))


@pytest.mark.fault
def test_host_in_the_environment_cannot_move_the_server_off_loopback(tmp_path, monkeypatch):
    """llama.cpp's server lets LLAMA_ARG_HOST override --host; the kit's server must stay on 127.0.0.1."""
    monkeypatch.setenv("LLAMA_ARG_HOST", "0.0.0.0")
    monkeypatch.setenv("LLAMA_ARG_PORT", "1")
    server = EmbeddedServer(LLMSettings(), tmp_path / "server.log")
    server.start()
    try:
        assert listening_addresses(server.process.pid) == {("127.0.0.1", server.port)}
    finally:
        server.stop()


def test_server_dies_with_a_killed_parent():
    """A kernel killed with SIGKILL runs no atexit handler; the watchdog must still stop its server."""
    starter = (
        "import time; from ragtrial.config import LLMSettings\n"
        "from ragtrial.llm.server import EmbeddedServer\n"
        "from ragtrial.llm.server import process_tree\n"
        "s = EmbeddedServer(LLMSettings()); s.start(); print(*process_tree(s.process.pid), flush=True)\n"
        "time.sleep(600)"
    )
    parent = subprocess.Popen([sys.executable, "-c", starter], stdout=subprocess.PIPE, text=True)
    watchdog_and_server = [int(pid) for pid in parent.stdout.readline().split()]
    assert len(watchdog_and_server) == 2
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(map(_alive, watchdog_and_server)):
        time.sleep(0.2)
    assert not any(map(_alive, watchdog_and_server))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def test_a_batchs_runs_on_the_embedded_model_share_one_server_stopped_with_the_batch(tmp_path, monkeypatch):
    """`runner.batch.BatchServers`: one server for every run on the same server settings, handed to
    the kernels through `BATCH_SERVERS_ENV` (which `ensure_embedded` then returns without starting
    its own); none for a model-free run or a run against an endpoint; stopped with the batch.
    """
    from ragtrial.config.batch import RunSpec
    from ragtrial.config.settings import Settings
    from ragtrial.llm.server import BATCH_SERVERS_ENV, ensure_embedded, server_key
    from ragtrial.runner.batch import EMBEDDED_SERVER_LOG, BatchServers

    def answers(url: str) -> bool:
        try:
            with urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=5) as resp:
                return resp.status == 200
        except OSError:
            return False

    servers = BatchServers(tmp_path, log=lambda line: None)
    notebooks = ("04_rag_vs_graphrag_qa", "06_judge_bias_audit")
    on_model = [RunSpec(notebook=name, settings=Settings()) for name in notebooks]
    model_free = RunSpec(notebook="13_retrieval_benchmark", settings=Settings())
    endpoint_llm = {"backend": "openai_compatible", "base_url": "http://127.0.0.1:1/v1"}
    endpoint = RunSpec(notebook=notebooks[0], settings=Settings.model_validate({"llm": endpoint_llm}))
    try:
        first, second = (servers.environment(spec) for spec in on_model)
        assert first == second and set(first) == {BATCH_SERVERS_ENV}
        # a project's own notebook, outside the registry, may call the model: it gets the server too
        assert servers.environment(RunSpec(notebook="our_own_experiment", settings=Settings())) == first
        assert servers.environment(model_free) == {} and servers.environment(endpoint) == {}
        (url,) = json.loads(first[BATCH_SERVERS_ENV]).values()
        assert answers(url) and (tmp_path / EMBEDDED_SERVER_LOG).stat().st_size > 0
    finally:
        servers.stop()
    assert not answers(url)
    # a kernel given the variable returns the batch's URL as it is: it starts no server of its own
    elsewhere = "http://127.0.0.1:9/v1"
    monkeypatch.setenv(BATCH_SERVERS_ENV, json.dumps({server_key(LLMSettings()): elsewhere}))
    assert ensure_embedded(LLMSettings()) == elsewhere
