"""The LLM layer against a scripted OpenAI-compatible server: retries, failures, cache, ledger."""

import pytest
from conftest import make_llm
from pydantic import BaseModel

from ragtrial.llm.client import fold_system_messages
from ragtrial.llm.errors import LLMError, StructuredOutputError


class Pair(BaseModel):
    city: str
    continent: str


def test_429_then_success_is_retried_and_cached(scripted, tmp_path):
    scripted.script.extend([("status", 429), ("status", 429)])
    llm = make_llm(scripted.base_url, tmp_path)
    done = llm.complete("hello", stage="t")
    assert done.text.startswith("echo: hello") and done.attempts == 3 and not done.cached
    again = llm.complete("hello", stage="t")
    assert again.cached and again.text == done.text and again.prompt_tokens == done.prompt_tokens
    assert len(scripted.chat_requests()) == 3
    ledger = llm.ledger.frame()
    assert list(ledger["cached"]) == [False, True] and list(ledger["attempts"]) == [3, 0]


def test_500_burst_beyond_retries_fails_is_counted_and_not_cached(scripted, tmp_path):
    scripted.script.extend([("status", 500)] * 3)
    llm = make_llm(scripted.base_url, tmp_path, max_retries=2)
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


def test_malformed_twice_raises_records_and_caches_nothing(scripted, tmp_path):
    scripted.script.extend([("text", "{not json"), ("text", '{"city": "Tokyo"}')])
    llm = make_llm(scripted.base_url, tmp_path)
    with pytest.raises(StructuredOutputError) as err:
        llm.structured("capital?", Pair, stage="t")
    assert "continent" in str(err.value) and err.value.raw_text == '{"city": "Tokyo"}'
    assert llm.ledger.frame()["failure"].tolist() == ["parse"]
    assert llm.cache.counts()["completions"] == 0


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


def test_replicates_are_distinct_calls_with_distinct_seeds(scripted, tmp_path):
    llm = make_llm(scripted.base_url, tmp_path)
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

    url = "http://127.0.0.1:1/v1"  # an openai_compatible backend requires one; the embedded ignores it
    assert LLMSettings(backend=backend, text_api=text_api, base_url=url).completions_api is expected
