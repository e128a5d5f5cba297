"""Rate limits: the kit's own budget, the endpoint's 429s, and one shared client per endpoint."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import make_llm

from ragtrial.llm.errors import LLMError
from ragtrial.llm.rate_limit import Bucket, RateLimiter


def test_a_bucket_holds_one_seconds_worth_and_refills_evenly():
    bucket = Bucket(120, now=0.0)  # 2 per second
    assert bucket.capacity == 2 and bucket.wait_for(1) == 0
    bucket.level -= 2
    assert bucket.wait_for(1) == pytest.approx(0.5)
    bucket.refill(0.25)
    assert bucket.level == pytest.approx(0.5)
    assert Bucket(30, now=0.0).capacity == 1  # at least one unit


def test_a_draw_larger_than_the_bucket_waits_for_a_full_bucket_and_leaves_it_in_debt():
    bucket = Bucket(600, now=0.0)  # 10 per second
    bucket.level = 5
    assert bucket.wait_for(50) == pytest.approx(0.5)  # until full (10), not until 50
    bucket.level -= 50
    assert bucket.wait_for(1) == pytest.approx(4.6)


def test_a_pause_holds_every_threads_next_request():
    now = [100.0]
    limiter = RateLimiter(None, None, clock=lambda: now[0])
    limiter.pause(3.0)
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (limiter.acquire(), done.set()))
    waiter.start()
    assert not done.wait(0.2)
    now[0] += 3.0
    waiter.join(5)  # the condition re-checks the clock after its wait
    assert done.is_set()


@pytest.mark.fault
def test_a_throttled_run_slows_down_and_finishes_paying_each_reply_once(scripted, tmp_path):
    scripted.rate_limit = (3, 1.0, 0.3)  # 3 requests a second, then 429 with Retry-After 0.3 s
    llm = make_llm(scripted.base_url, tmp_path, concurrency=8, max_retries=0)
    texts = llm.fan_out(lambda i: llm.complete(f"prompt {i}", stage="s").text, range(12), label="s")
    assert texts == [f"echo: prompt {i}" for i in range(12)]
    ledger = llm.ledger.frame()
    assert scripted.refused > 0  # the endpoint did throttle this run
    assert (ledger["failure"] == "").all() and len(ledger) == 12
    assert int(ledger["throttled"].sum()) == scripted.refused
    assert int(ledger["attempts"].sum()) == len(scripted.requests) == 12 + scripted.refused
    # nothing paid twice: a rerun is served by the cache
    again = make_llm(scripted.base_url, tmp_path, concurrency=8)
    again.fan_out(lambda i: again.complete(f"prompt {i}", stage="s"), range(12), label="s")
    assert len(scripted.requests) == 12 + scripted.refused


def test_the_kits_own_request_budget_keeps_the_run_under_the_endpoints_limit(scripted, tmp_path):
    scripted.rate_limit = (5, 1.0, 5.0)
    llm = make_llm(scripted.base_url, tmp_path, concurrency=8, requests_per_minute=120)
    llm.fan_out(lambda i: llm.complete(f"prompt {i}", stage="s"), range(8), label="s")
    assert scripted.refused == 0


@pytest.mark.fault
def test_throttling_longer_than_throttle_max_s_fails_as_a_rate_limit(scripted, tmp_path):
    scripted.rate_limit = (0, 1.0, 0.2)  # refuses everything
    llm = make_llm(scripted.base_url, tmp_path, throttle_max_s=0.5, max_retries=0)
    with pytest.raises(LLMError, match=r"rate_limit after 3 attempt\(s\), 3 throttled") as err:
        llm.complete("prompt", stage="s")
    assert err.value.throttled == 3
    row = llm.ledger.frame().iloc[0]
    assert (row["failure"], row["attempts"], row["throttled"]) == ("rate_limit", 3, 3)


class _KeepAliveHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    peers: list[tuple[str, int]] = []
    keys: list[str] = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).peers.append(self.client_address)
        type(self).keys.append(self.headers.get("Authorization", ""))
        body = (
            b'{"id":"x","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,'
            b'"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}],'
            b'"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}'
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_one_client_per_endpoint_reuses_its_connection_and_reads_the_key_at_call_time(tmp_path, monkeypatch):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAliveHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        llm = make_llm(f"http://127.0.0.1:{httpd.server_address[1]}/v1", tmp_path, api_key_env="RT_TEST_KEY")
        for i in range(4):
            monkeypatch.setenv("RT_TEST_KEY", f"sk-key-{i}")
            llm.complete(f"prompt {i}", stage="s")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert len(set(_KeepAliveHandler.peers)) == 1  # one kept-alive connection for four calls
    assert _KeepAliveHandler.keys == [f"Bearer sk-key-{i}" for i in range(4)]
    client = llm.clients.get(llm.settings.base_url)
    assert "sk-key" not in repr(vars(client))  # the shared client holds no key
