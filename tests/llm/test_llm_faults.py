"""The LLM layer against a scripted OpenAI-compatible server: retries, failures, cache, ledger."""

import sqlite3

import pytest
from conftest import make_llm
from pydantic import BaseModel

from ragtrial.llm.cache import CacheError, ResponseCache
from ragtrial.llm.client import fold_system_messages
from ragtrial.llm.errors import LLMError, StructuredOutputError
from ragtrial.llm.ledger import answered_by, summarize
from ragtrial.llm.middleware import RETRY_FAILURES_ENV


class Pair(BaseModel):
    city: str
    continent: str


def test_429_then_success_is_retried_and_cached(scripted, tmp_path, cache_location):
    scripted.script.extend([("status", 429), ("status", 429)])
    llm = make_llm(scripted.base_url, tmp_path, cache_location)
    done = llm.complete("hello", stage="t")
    assert done.text.startswith("echo: hello") and done.attempts == 3 and not done.cached
    again = llm.complete("hello", stage="t")
    assert again.cached and again.text == done.text and again.prompt_tokens == done.prompt_tokens
    assert len(scripted.chat_requests()) == 3
    ledger = llm.ledger.frame()
    assert list(ledger["cached"]) == [False, True] and list(ledger["attempts"]) == [3, 0]


def test_500_burst_beyond_retries_fails_is_counted_and_not_cached(scripted, tmp_path, cache_location):
    scripted.script.extend([("status", 500)] * 3)
    llm = make_llm(scripted.base_url, tmp_path, cache_location, max_retries=2)
    with pytest.raises(LLMError) as err:
        llm.complete("burst", stage="t")
    assert err.value.kind == "server_error" and scripted.base_url in str(err.value)
    assert llm.ledger.frame()["failure"].tolist() == ["server_error"]
    done = llm.complete("burst", stage="t")  # the failure was not cached: this call is live
    assert not done.cached and len(scripted.chat_requests()) == 4


def test_timeout_then_success(scripted, tmp_path):
    scripted.script.append(("sleep", 1.0))
    llm = make_llm(scripted.base_url, tmp_path, timeout_s=0.3)
    done = llm.complete("slow", stage="t")
    assert done.attempts == 2 and done.text.startswith("echo: slow")


def test_dropped_connection_then_success(scripted, tmp_path):
    scripted.script.append(("drop",))
    llm = make_llm(scripted.base_url, tmp_path)
    assert llm.complete("drop", stage="t").attempts == 2


def test_client_error_is_not_retried(scripted, tmp_path):
    scripted.script.append(("status", 400))
    llm = make_llm(scripted.base_url, tmp_path)
    with pytest.raises(LLMError) as err:
        llm.complete("bad", stage="t")
    assert err.value.kind == "http_400" and len(scripted.chat_requests()) == 1


def test_dead_endpoint_names_the_endpoint(tmp_path):
    llm = make_llm("http://127.0.0.1:9/v1", tmp_path, max_retries=1)
    with pytest.raises(LLMError, match=r"127\.0\.0\.1:9/v1.*connection after 2 attempt"):
        llm.complete("anyone?", stage="t")


def test_malformed_json_is_repaired_once(scripted, tmp_path):
    scripted.script.extend(
        [("text", "the city is Tokyo"), ("text", '{"city": "Tokyo", "continent": "Asia"}')]
    )
    llm = make_llm(scripted.base_url, tmp_path)
    answer = llm.structured("capital of Japan?", Pair, stage="t")
    assert answer == Pair(city="Tokyo", continent="Asia")
    repair = scripted.chat_requests()[1]["body"]["messages"]
    assert repair[-2]["content"] == "the city is Tokyo" and "not valid JSON" in repair[-1]["content"]
    # the repaired answer is cached under the original request: a replay makes no call at all
    assert llm.structured("capital of Japan?", Pair, stage="t") == answer
    assert len(scripted.chat_requests()) == 2
    rows = llm.ledger.frame()
    assert rows["cached"].tolist() == [False, True] and rows["attempts"].tolist() == [2, 0]


def test_a_raw_newline_inside_a_string_parses_without_a_repair_round(scripted, tmp_path):
    # what llama.cpp's JSON grammar lets a small model write: a literal line break inside a value
    scripted.script.append(("text", '{"city": "Tokyo\n", "continent": "Asia\tEast"}'))
    answer = make_llm(scripted.base_url, tmp_path).structured("capital of Japan?", Pair, stage="t")
    assert answer == Pair(city="Tokyo\n", continent="Asia\tEast") and len(scripted.chat_requests()) == 1


@pytest.mark.fault
def test_invalid_twice_at_temperature_above_zero_is_kept_as_the_seeded_draw(scripted, tmp_path):
    scripted.script.extend([("text", "{not json"), ("text", '{"city": "Tokyo"}')])
    llm = make_llm(scripted.base_url, tmp_path, temperature=0.7)
    with pytest.raises(StructuredOutputError) as err:
        llm.structured("capital?", Pair, stage="t")
    assert "continent" in str(err.value) and err.value.raw_text == '{"city": "Tokyo"}'
    assert llm.ledger.frame()["failure"].tolist() == ["parse"]
    # the seeded draw is replayed as it came, like a valid one: redrawing only failures would bias
    with pytest.raises(StructuredOutputError):
        llm.structured("capital?", Pair, stage="t")
    assert len(scripted.chat_requests()) == 2 and llm.ledger.frame()["cached"].tolist() == [False, True]


@pytest.mark.parametrize(
    "mode,expected",
    [("json_object_schema", "json_object"), ("json_schema", "json_schema"), ("prompt_only", None)],
)
def test_json_mode_shapes_the_request(scripted, tmp_path, mode, expected):
    scripted.script.append(("text", '{"city": "Paris", "continent": "Europe"}'))
    make_llm(scripted.base_url, tmp_path, json_mode=mode).structured("France?", Pair, stage="t")
    body = scripted.chat_requests()[0]["body"]
    assert (body.get("response_format") or {}).get("type") == expected
    if expected is None:
        assert "JSON schema" in body["messages"][-1]["content"]


def test_replicates_are_distinct_calls_with_distinct_seeds(scripted, tmp_path, cache_location):
    llm = make_llm(scripted.base_url, tmp_path, cache_location)
    for replicate in (0, 1, 0):
        llm.complete("same prompt", stage="t", replicate=replicate)
    seeds = [r["body"]["seed"] for r in scripted.chat_requests()]
    assert seeds == [0, 1]  # the third call replays replicate 0 from the cache


def test_system_messages_are_folded_into_the_user_turn(scripted, tmp_path):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert fold_system_messages(messages) == [{"role": "user", "content": "Be brief.\n\nHi"}]
    make_llm(scripted.base_url, tmp_path, fold_system=True).complete(messages, stage="t")
    assert scripted.chat_requests()[0]["body"]["messages"] == [{"role": "user", "content": "Be brief.\n\nHi"}]


def test_api_key_is_read_at_call_time_and_sent(scripted, tmp_path, monkeypatch):
    llm = make_llm(scripted.base_url, tmp_path, api_key_env="RAGTRIAL_TEST_KEY")
    monkeypatch.setenv("RAGTRIAL_TEST_KEY", "first-key")
    llm.complete("a", stage="t")
    monkeypatch.setenv("RAGTRIAL_TEST_KEY", "second-key")
    llm.complete("b", stage="t")
    assert [r["authorization"] for r in scripted.chat_requests()] == ["Bearer first-key", "Bearer second-key"]


def test_free_text_goes_to_completions_as_plain_text_and_structured_stays_on_chat(scripted, tmp_path):
    scripted.script.extend([("text", " Tokyo"), ("text", '{"city": "Tokyo", "continent": "Asia"}')])
    llm = make_llm(scripted.base_url, tmp_path, text_api="completions")
    messages = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Capital of Japan?"},
    ]
    assert llm.complete(messages, stage="t", stop=["\n"]).text == " Tokyo"
    body = scripted.text_requests()[0]["body"]
    assert body["prompt"] == "Answer briefly.\n\nCapital of Japan?" and body["stop"] == ["\n"]
    assert llm.structured(messages, Pair, stage="t") == Pair(city="Tokyo", continent="Asia")
    assert len(scripted.chat_requests()) == 1 and "response_format" in scripted.chat_requests()[0]["body"]
    # the same messages over chat are a different request, so a different cache entry
    assert not make_llm(scripted.base_url, tmp_path).complete(messages, stage="t", stop=["\n"]).cached


@pytest.mark.parametrize(
    "backend,text_api,expected",
    [
        ("embedded", "auto", True),
        ("openai_compatible", "auto", False),
        ("embedded", "chat", False),
        ("openai_compatible", "completions", True),
    ],
)
def test_auto_text_api_uses_completions_only_for_the_embedded_base_model(backend, text_api, expected):
    from ragtrial.config.llm import LLMSettings

    url = "http://127.0.0.1:1/v1" if backend == "openai_compatible" else None  # the embedded refuses one
    assert LLMSettings(backend=backend, text_api=text_api, base_url=url).completions_api is expected


# ---------------------------------------------------------------- issue 12: empty and malformed replies


def cold_and_warm(llm_of, ask):
    """`ask` on a fresh LLM, then on a second LLM over the same cache (a warm rerun)."""
    first, second = llm_of(), llm_of()
    return ask(first), ask(second), first, second


@pytest.mark.fault
@pytest.mark.parametrize("blank", ["", "  \n "])
def test_an_empty_reply_is_a_retried_counted_uncached_failure(scripted, tmp_path, cache_location, blank):
    scripted.script.extend([("text", blank)] * 2)
    llm = make_llm(scripted.base_url, tmp_path, cache_location, max_retries=1)
    with pytest.raises(LLMError) as err:
        llm.complete("say nothing", stage="answer")
    assert err.value.kind == "empty_reply" and err.value.attempts == 2 and len(scripted.chat_requests()) == 2
    row = llm.ledger.frame().iloc[0]
    assert (row["failure"], row["attempts"], row["cached"]) == ("empty_reply", 2, False)
    assert row["prompt_tokens"] == 2 * 2  # both attempts' prompt tokens ("say nothing" twice)
    assert summarize(llm.ledger.frame())["failures"] == 1 and llm.cache.counts()["completions"] == 0
    done = llm.complete("say nothing", stage="answer")  # the server recovered: asked again, not replayed
    assert done.text.startswith("echo:") and not done.cached


@pytest.mark.fault
def test_a_cached_empty_reply_from_an_older_cache_is_asked_again(scripted, tmp_path):
    llm = make_llm(scripted.base_url, tmp_path)
    llm.complete("hello", stage="t")
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:  # what the cache kept before issue 12
        conn.execute("UPDATE completions SET text = '', completion_tokens = 0")
    again = llm.complete("hello", stage="t")
    assert not again.cached and again.text.startswith("echo: hello") and len(scripted.chat_requests()) == 2


@pytest.mark.fault
def test_a_reply_that_is_only_its_stop_sequence_is_a_reply_and_is_cached(scripted, tmp_path):
    # llama.cpp's reply when the model's first token is the stop sequence: no text, one token
    body = {
        "model": "scripted",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ""}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1},
    }
    scripted.script.append(("body", 200, body))
    ask = lambda llm: llm.complete("short answer?", stage="answer", stop=["\n"])  # noqa: E731
    first, second, _, warm = cold_and_warm(lambda: make_llm(scripted.base_url, tmp_path), ask)
    assert (first.text, first.cached, second.text, second.cached) == ("", False, "", True)
    assert len(scripted.chat_requests()) == 1 and warm.ledger.frame()["failure"].tolist() == [""]


MALFORMED_BODIES = {
    "empty choices": ("body", 200, {"model": "scripted", "choices": []}),
    "no choices": ("body", 200, {"id": "x", "object": "chat.completion"}),
    "choices not a list": ("body", 200, {"choices": {"0": "Paris"}}),
    "no message": ("body", 200, {"choices": [{"index": 0, "finish_reason": "stop"}]}),
    "content not a string": ("body", 200, {"choices": [{"message": {"content": ["Paris"]}}]}),
    "null content": ("body", 200, {"choices": [{"message": {"content": None}, "finish_reason": "stop"}]}),
    "not an object": ("body", 200, ["Paris"]),
    "truncated JSON": ("raw", 200, b'{"choices": [{"message": {"cont'),
    "not JSON": ("raw", 200, b"<html>bad gateway</html>"),
}


@pytest.mark.fault
@pytest.mark.parametrize("case", MALFORMED_BODIES)
def test_a_malformed_200_is_a_typed_recorded_uncached_failure(scripted, tmp_path, case):
    scripted.script.extend([MALFORMED_BODIES[case]] * 2)
    llm = make_llm(scripted.base_url, tmp_path, max_retries=1)
    with pytest.raises(LLMError) as err:
        llm.complete("capital of France?", stage="t")
    expected = "empty_reply" if case == "null content" else "malformed_response"
    assert err.value.kind == expected and scripted.base_url in str(err.value)
    row = llm.ledger.frame().iloc[0]
    assert (row["failure"], row["attempts"], row["cached"]) == (expected, 2, False)
    assert llm.cache.counts()["completions"] == 0


@pytest.mark.fault
def test_a_malformed_200_then_a_reply_is_retried(scripted, tmp_path):
    scripted.script.append(MALFORMED_BODIES["empty choices"])
    done = make_llm(scripted.base_url, tmp_path).complete("hello", stage="t")
    assert done.text.startswith("echo: hello") and done.attempts == 2 and len(scripted.chat_requests()) == 2


@pytest.mark.fault
def test_the_ledger_records_what_actually_answered(scripted, tmp_path):
    body = {"model": "served-v2", "choices": [{"message": {"content": "Paris"}, "finish_reason": "stop"}]}
    scripted.script.append(("body", 200, body))
    llm = make_llm(scripted.base_url, tmp_path)
    llm.complete("capital?", stage="t")
    llm.complete("capital?", stage="t")  # replayed: the cache kept what served it
    rows = llm.ledger.frame()
    assert rows["model"].tolist() == ["scripted", "scripted"]
    assert rows["served_model"].tolist() == ["served-v2", "served-v2"]
    assert (
        answered_by(rows) == "served-v2 (1 call live); 1 call replayed from the cache (answered by served-v2)"
    )


# ---------------------------------------------------------------- issue 12: the ledger's attempts


@pytest.mark.fault
def test_a_failed_call_records_its_true_attempt_count(scripted, tmp_path):
    scripted.script.extend([("status", 503)] * 3)
    llm = make_llm(scripted.base_url, tmp_path, max_retries=2)
    with pytest.raises(LLMError):
        llm.complete("burst", stage="t")
    assert llm.ledger.frame()["attempts"].tolist() == [3] and len(scripted.chat_requests()) == 3


@pytest.mark.fault
def test_a_structured_call_that_fails_its_repair_round_records_both_requests_tokens(scripted, tmp_path):
    scripted.script.extend([("text", "{not json"), ("text", '{"city": "Tokyo"}')])
    llm = make_llm(scripted.base_url, tmp_path)
    with pytest.raises(StructuredOutputError):
        llm.structured("capital?", Pair, stage="t")
    sent = scripted.chat_requests()
    prompt_words = sum(len(m["content"].split()) for r in sent for m in r["body"]["messages"])
    row = llm.ledger.frame().iloc[0]
    assert (row["prompt_tokens"], row["completion_tokens"], row["attempts"]) == (prompt_words, 2 + 2, 2)


# ---------------------------------------------------------------- issue 12: deterministic failures


@pytest.mark.fault
def test_a_validation_failure_at_temperature_zero_is_replayed_counted_and_paid_once(
    scripted, tmp_path, cache_location
):
    scripted.script.extend([("text", "{not json"), ("text", '{"city": "Tokyo"}')])
    ask = lambda llm: pytest.raises(StructuredOutputError, llm.structured, "capital?", Pair, stage="t")  # noqa: E731
    cold, warm, cold_llm, warm_llm = cold_and_warm(
        lambda: make_llm(scripted.base_url, tmp_path, cache_location), ask
    )
    assert len(scripted.chat_requests()) == 2  # the warm run asked nothing
    assert warm.value.raw_text == cold.value.raw_text == '{"city": "Tokyo"}' and warm.value.kind == "parse"
    cold_row, warm_row = cold_llm.ledger.frame().iloc[0], warm_llm.ledger.frame().iloc[0]
    assert (cold_row["cached"], warm_row["cached"]) == (False, True)
    assert warm_row["failure"] == "parse" and warm_row["prompt_tokens"] == cold_row["prompt_tokens"]
    warm_summary = summarize(warm_llm.ledger.frame())
    assert warm_summary["failures"] == 1 and warm_summary["live_prompt_tokens"] == 0


@pytest.mark.fault
def test_retry_failures_asks_a_recorded_failure_again_and_keeps_the_new_reply(
    scripted, tmp_path, cache_location, monkeypatch
):
    scripted.script.extend([("text", "{not json"), ("text", '{"city": "Tokyo"}')])
    with pytest.raises(StructuredOutputError):
        make_llm(scripted.base_url, tmp_path, cache_location).structured("capital?", Pair, stage="t")
    scripted.script.append(("text", '{"city": "Tokyo", "continent": "Asia"}'))
    monkeypatch.setenv(RETRY_FAILURES_ENV, "1")
    retried = make_llm(scripted.base_url, tmp_path, cache_location).structured("capital?", Pair, stage="t")
    assert retried == Pair(city="Tokyo", continent="Asia") and len(scripted.chat_requests()) == 3
    monkeypatch.delenv(RETRY_FAILURES_ENV)
    replay = make_llm(scripted.base_url, tmp_path, cache_location)
    assert replay.structured("capital?", Pair, stage="t") == retried and len(scripted.chat_requests()) == 3
    assert replay.ledger.frame()["failure"].tolist() == [""]


@pytest.mark.fault
def test_a_transient_failure_of_a_structured_call_is_not_kept(scripted, tmp_path, cache_location):
    scripted.script.append(("status", 400))
    with pytest.raises(LLMError):
        make_llm(scripted.base_url, tmp_path, cache_location).structured("capital?", Pair, stage="t")
    scripted.script.append(("text", '{"city": "Tokyo", "continent": "Asia"}'))
    assert (
        make_llm(scripted.base_url, tmp_path, cache_location).structured("capital?", Pair, stage="t").city
        == "Tokyo"
    )


# ---------------------------------------------------------------- issue 12: no key in an error


@pytest.mark.fault
def test_a_key_echoed_in_an_error_body_is_redacted(scripted, tmp_path, monkeypatch):
    key = "sk-echoed-0123456789abcdef"
    monkeypatch.setenv("RAGTRIAL_TEST_KEY", key)
    scripted.script.append(("body", 401, {"error": {"message": f"Incorrect API key provided: {key}"}}))
    llm = make_llm(
        scripted.base_url.replace("http://", "http://user:pw@"), tmp_path, api_key_env="RAGTRIAL_TEST_KEY"
    )
    with pytest.raises(LLMError) as err:
        llm.complete("hello", stage="t")
    assert key not in str(err.value) and "Incorrect API key provided: ***" in str(err.value)
    assert "user:pw" not in str(err.value) and err.value.__cause__ is None and err.value.__suppress_context__
    assert key not in (tmp_path / "ledger.csv").read_text()


@pytest.mark.fault
def test_a_read_only_cache_stops_the_call_before_it_is_paid(scripted, tmp_path, unwritable):
    """A read-only cache took the request's money and left no ledger row ("live calls 0"): the
    call's claim is a write, refused before any request.
    """
    location = tmp_path / "cache.sqlite"
    ResponseCache(location).close()
    unwritable(location)
    llm = make_llm(scripted.base_url, tmp_path, location)
    with pytest.raises(CacheError, match=f"{location}: attempt to write a readonly database .*writable"):
        llm.complete("hello", stage="t")
    assert scripted.chat_requests() == [] and llm.ledger.frame().empty


@pytest.mark.fault
def test_a_paid_reply_the_cache_cannot_store_is_in_the_ledger_and_stops_the_run(
    scripted, tmp_path, monkeypatch
):
    llm = make_llm(scripted.base_url, tmp_path)

    def full_disk(*args, **kwargs):
        raise CacheError(f"response cache {tmp_path / 'cache.sqlite'}: database or disk is full")

    monkeypatch.setattr(llm.cache, "put_completion", full_disk)
    with pytest.raises(CacheError, match="disk is full"):
        llm.complete("hello", stage="t")
    assert len(scripted.chat_requests()) == 1
    row = llm.ledger.frame().iloc[0]
    assert (row["failure"], bool(row["cached"]), row["attempts"]) == ("cache_write", False, 1)
    assert row["completion_tokens"] > 0 and row["served_model"]


@pytest.mark.fault
def test_a_reply_holding_a_nul_byte_is_stored_and_replayed_whole(scripted, tmp_path, cache_location):
    """PostgreSQL text cannot hold NUL: the reply failed the run, paid and unrecorded."""
    scripted.script.append(("text", "before\x00after"))
    llm = make_llm(scripted.base_url, tmp_path, cache_location)
    done = llm.complete("nul", stage="t")
    again = llm.complete("nul", stage="t")
    assert done.text == again.text == "before\x00after" and again.cached and not done.cached
    assert llm.ledger.frame()["failure"].tolist() == ["", ""]
