"""Each middleware wrapper alone, against scripted inner handlers, and the chain's stated order."""

from __future__ import annotations

import threading
import time

import httpx
import openai
import pytest
from pydantic import BaseModel

from ragtrial.config.llm import LLMSettings
from ragtrial.llm import middleware as mw
from ragtrial.llm.cache import ResponseCache
from ragtrial.llm.errors import BadReply, LLMError, StructuredOutputError
from ragtrial.llm.ledger import Ledger
from ragtrial.llm.middleware import Call, Reply


class City(BaseModel):
    city: str


def call(schema=None, **request) -> Call:
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}], **request}
    return Call("structured" if schema else "completion", body, "key-1", schema, "stage", "method", "p@v1", 0)


def scripted(*replies):
    """An inner handler answering with `replies` in turn (an exception is raised), recording calls."""
    seen: list[Call] = []
    queue = list(replies)

    def handle(c: Call) -> Reply:
        seen.append(c)
        reply = queue.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    return handle, seen


def test_the_llm_states_the_chain_once_outermost_first(tmp_path):
    from ragtrial.llm.client import LLM

    llm = LLM(LLMSettings(), ResponseCache(tmp_path / "c.sqlite"), Ledger("r"), lambda: "http://127.0.0.1:1")
    assert [name for name, _ in llm.middleware] == [
        "metrics", "cache", "endpoint", "latency", "structured", "limit", "retries", "rate limit",
    ]  # fmt: skip


def test_pipeline_wraps_the_first_layer_outermost():
    order: list[str] = []

    def layer(name):
        def wrap(inner):
            def handle(c):
                order.append(name)
                return inner(c)

            return handle

        return wrap

    handler = mw.pipeline(lambda c: Reply("x", 1, 1), [("a", layer("a")), ("b", layer("b"))])
    assert handler(call()).text == "x" and order == ["a", "b"]


def test_cache_replays_a_hit_without_the_inner_handler_and_stores_a_live_success(cache_location):
    cache = ResponseCache(cache_location)
    inner, seen = scripted(Reply("Paris", 7, 2, attempts=1))
    handler = mw.with_cache(cache, "m")(inner)
    live = handler(call())
    hit = handler(call())
    assert (live.text, live.cached, hit.text, hit.cached) == ("Paris", False, "Paris", True)
    assert (hit.prompt_tokens, hit.completion_tokens, hit.attempts) == (7, 2, 0) and len(seen) == 1


def test_cache_stores_no_failure(cache_location):
    cache = ResponseCache(cache_location)
    inner, _ = scripted(LLMError("server_error", "boom"))
    with pytest.raises(LLMError):
        mw.with_cache(cache, "m")(inner)(call())
    assert cache.counts()["completions"] == 0


def test_endpoint_is_resolved_only_when_a_call_goes_live(tmp_path):
    resolved = []
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put_completion("key-1", "m", "cached", 1, 1)
    inner, seen = scripted(Reply("live", 1, 1))
    handler = mw.pipeline(
        inner,
        [
            ("cache", mw.with_cache(cache, "m")),
            ("endpoint", mw.with_endpoint(lambda: resolved.append(1) or "u")),
        ],
    )
    assert handler(call()).text == "cached" and resolved == []
    assert handler(Call("completion", {"model": "m"}, "key-2", None, "s", "", "", 0)).text == "live"
    assert resolved == [1] and seen[0].base_url == "u"


def test_latency_covers_the_inner_call_and_is_set_on_failures_too():
    def slow(c):
        time.sleep(0.05)
        return Reply("x", 1, 1)

    assert mw.with_latency()(slow)(call()).latency_s >= 0.05
    inner, _ = scripted(LLMError("timeout", "slow"))
    with pytest.raises(LLMError) as failed:
        mw.with_latency()(inner)(call())
    assert failed.value.latency_s >= 0


def test_repair_asks_once_with_the_validation_error_and_adds_the_tokens():
    inner, seen = scripted(
        Reply("not json", 10, 3, attempts=1), Reply('{"city": "Paris"}', 20, 4, attempts=2)
    )
    reply = mw.with_repair()(inner)(call(City))
    assert reply.text == '{"city": "Paris"}' and (reply.prompt_tokens, reply.completion_tokens) == (30, 7)
    assert reply.attempts == 3
    repair_turns = seen[1].request["messages"]
    assert repair_turns[1] == {"role": "assistant", "content": "not json"}
    assert "not valid JSON for the required schema" in repair_turns[2]["content"]


@pytest.mark.fault
def test_repair_gives_up_after_one_round_and_reports_what_both_rounds_consumed():
    inner, _ = scripted(
        Reply("bad", 10, 3, attempts=1), Reply("still bad", 20, 4, attempts=2, served_model="m-v2")
    )
    with pytest.raises(StructuredOutputError) as failed:
        mw.with_repair()(inner)(call(City))
    assert failed.value.kind == "parse" and failed.value.raw_text == "still bad"
    assert (failed.value.prompt_tokens, failed.value.completion_tokens, failed.value.attempts) == (30, 7, 3)
    assert failed.value.served_model == "m-v2"


@pytest.mark.fault
def test_a_repair_request_that_fails_reports_both_requests():
    exhausted = LLMError("server_error", "boom")
    exhausted.attempts, exhausted.prompt_tokens = 3, 5
    inner, _ = scripted(Reply("bad", 10, 3, attempts=1), exhausted)
    with pytest.raises(LLMError) as failed:
        mw.with_repair()(inner)(call(City))
    assert (failed.value.kind, failed.value.attempts, failed.value.prompt_tokens) == ("server_error", 4, 15)


def test_repair_leaves_free_text_alone():
    inner, seen = scripted(Reply("not json at all", 1, 1))
    assert mw.with_repair()(inner)(call()).text == "not json at all" and len(seen) == 1


def test_limit_holds_at_most_concurrency_calls_in_flight():
    in_flight, most = 0, 0
    lock = threading.Lock()

    def inner(c):
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        time.sleep(0.02)
        with lock:
            in_flight -= 1
        return Reply("x", 1, 1)

    handler = mw.with_limit(2)(inner)
    threads = [threading.Thread(target=handler, args=(call(),)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == 2


def test_retries_back_off_on_a_dropped_connection_and_count_the_attempts():
    request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    dropped = openai.APIConnectionError(request=request)
    inner, seen = scripted(dropped, dropped, Reply("x", 1, 1))
    settings = LLMSettings(max_retries=3, backoff_initial_s=0.001, backoff_max_s=0.002)
    reply = mw.with_retries(settings)(inner)(call())
    assert reply.attempts == 3 and len(seen) == 3


def test_retries_give_up_with_an_error_naming_the_endpoint():
    request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    inner, seen = scripted(*[openai.APIConnectionError(request=request)] * 3)
    settings = LLMSettings(max_retries=2, backoff_initial_s=0.001, backoff_max_s=0.002)
    with pytest.raises(LLMError) as failed:
        mw.with_retries(settings)(inner)(
            Call("completion", {"model": "m"}, "k", None, "s", "", "", 0, "http://e/v1")
        )
    assert failed.value.kind == "connection" and "http://e/v1 model m" in str(failed.value) and len(seen) == 3


def test_metrics_records_one_row_per_call_success_or_failure():
    ledger = Ledger("run")
    ok, _ = scripted(Reply("x", 5, 2, attempts=1, latency_s=0.5))
    mw.with_metrics(ledger, "m")(ok)(call())
    failing = LLMError("timeout", "slow")
    failing.attempts, failing.latency_s = 2, 1.5
    bad, _ = scripted(failing)
    with pytest.raises(LLMError):
        mw.with_metrics(ledger, "m")(bad)(call())
    rows = ledger.frame()
    assert list(rows["failure"]) == ["", "timeout"] and list(rows["attempts"]) == [1, 2]
    assert list(rows["prompt"]) == ["p@v1", "p@v1"] and list(rows["latency_s"]) == [0.5, 1.5]


@pytest.mark.fault
def test_retries_that_give_up_report_every_attempt_and_the_tokens_of_bad_replies():
    inner, seen = scripted(*[BadReply("empty_reply", "no text", 7, 1)] * 3)
    settings = LLMSettings(max_retries=2, backoff_initial_s=0.001, backoff_max_s=0.002)
    with pytest.raises(LLMError) as failed:
        mw.with_retries(settings)(inner)(call())
    assert (failed.value.kind, failed.value.attempts, len(seen)) == ("empty_reply", 3, 3)
    assert (failed.value.prompt_tokens, failed.value.completion_tokens) == (21, 3)


@pytest.mark.fault
def test_a_reply_after_bad_replies_carries_their_tokens_too():
    inner, _ = scripted(BadReply("malformed_response", "no choices", 7, 0), Reply("x", 7, 2))
    settings = LLMSettings(max_retries=2, backoff_initial_s=0.001, backoff_max_s=0.002)
    reply = mw.with_retries(settings)(inner)(call())
    assert (reply.attempts, reply.prompt_tokens, reply.completion_tokens) == (2, 14, 2)


@pytest.mark.fault
def test_cache_keeps_a_validation_failure_at_temperature_zero_and_replays_it_as_a_failure(cache_location):
    cache = ResponseCache(cache_location)
    invalid = StructuredOutputError("reply does not match City", '{"town": "Paris"}')
    invalid.prompt_tokens, invalid.completion_tokens, invalid.attempts = 30, 7, 2
    inner, seen = scripted(invalid)
    handler = mw.with_cache(cache, "m")(inner)
    with pytest.raises(StructuredOutputError):
        handler(call(City, temperature=0.0))
    with pytest.raises(StructuredOutputError) as replayed:
        handler(call(City, temperature=0.0))
    assert len(seen) == 1 and replayed.value.cached and replayed.value.raw_text == '{"town": "Paris"}'
    assert (replayed.value.prompt_tokens, replayed.value.completion_tokens, replayed.value.attempts) == (
        30,
        7,
        0,
    )
    assert "retry-failures" in str(replayed.value)


@pytest.mark.fault
def test_metrics_records_a_replayed_failure_as_cached_and_the_served_model():
    ledger = Ledger("run")
    replayed = StructuredOutputError("no match", "{}")
    replayed.cached, replayed.served_model = True, "m-v2"
    inner, _ = scripted(replayed, Reply("x", 1, 1, attempts=1, served_model="m-v3"))
    handler = mw.with_metrics(ledger, "m")(inner)
    with pytest.raises(StructuredOutputError):
        handler(call(City))
    handler(call())
    rows = ledger.frame()
    assert rows["cached"].tolist() == [True, False] and rows["failure"].tolist() == ["parse", ""]
    assert rows["served_model"].tolist() == ["m-v2", "m-v3"]
