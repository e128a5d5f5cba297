"""The model proxy: an upstream system's OpenAI client talking to the kit's LLM layer, which talks to
the scripted server. Calls are ledgered under the method and stage of the path, cached, held to the
run's model and sampling, and attributed to the caller's tallies while the method is bound.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
import openai
import pytest
from conftest import make_llm
from scripted_server import InFlight

from ragtrial.config.llm import EmbeddingSettings
from ragtrial.llm.embedder import Embedder
from ragtrial.llm.hashing_embedder import HashingEmbedder
from ragtrial.llm.proxy import ModelProxy
from ragtrial.llm.tokens import count_tokens

SCHEMA = {
    "title": "Answer",
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


@contextmanager
def proxied(scripted, tmp_path, embedder=None, **settings):
    """A proxy in front of a kit LLM (and, unless given, a kit embedder) on the scripted server."""
    llm = make_llm(scripted.base_url, tmp_path, **{"concurrency": 4, **settings})
    if embedder is None:
        embedder = Embedder(
            EmbeddingSettings(backend="openai_compatible", base_url=scripted.base_url, model="emb"),
            llm.cache,
            llm.ledger,
            llm.settings,
        )
    with ModelProxy(llm, embedder) as proxy:
        yield proxy


def client(proxy: ModelProxy, method: str = "graphrag", stage: str = "query") -> openai.OpenAI:
    """The upstream system's side: the real openai client, its default retries left on."""
    return openai.OpenAI(base_url=proxy.base_url(method, stage), api_key="ragtrial-proxy")


def ask(proxy: ModelProxy, text: str, method: str = "graphrag", **request):
    return client(proxy, method).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": text}], **request
    )


def test_a_replayed_reply_is_the_reply_first_served(scripted, tmp_path):
    # a system may quote a whole reply in its next prompt (instructor's retry prompt does): a replay
    # that changed its id or time would change that prompt, and miss the cache
    with proxied(scripted, tmp_path) as proxy:
        first = ask(proxy, "hello there")
        again = ask(proxy, "hello there")
        other = ask(proxy, "another question")
    assert len(scripted.requests) == 2
    assert again.model_dump() == first.model_dump()
    assert other.id != first.id


def test_chat_is_held_to_the_run_ledgered_under_the_method_and_replayed(scripted, tmp_path):
    with proxied(scripted, tmp_path) as proxy:
        request = {"temperature": 0.9, "top_p": 0.5, "seed": 77, "max_tokens": 20, "stop": "END"}
        first = ask(proxy, "hello there", **request)
        again = ask(proxy, "hello there", **request)
        rows = proxy.llm.ledger.frame()
    assert first.choices[0].message.content == again.choices[0].message.content == "echo: hello there"
    assert first.model == "scripted" and first.choices[0].finish_reason == "stop"
    assert len(scripted.requests) == 1, "the repeated request was not replayed from the cache"
    sent = scripted.requests[0]
    assert {k: sent["body"][k] for k in ("model", "temperature", "top_p", "seed", "max_tokens", "stop")} == {
        "model": "scripted",
        "temperature": 0.0,
        "top_p": 1.0,
        "seed": 0,
        "max_tokens": 20,
        "stop": ["END"],
    }
    assert "ragtrial-proxy" not in sent["authorization"]  # the upstream's key stays at the proxy
    assert rows[["kind", "method", "stage", "cached"]].values.tolist() == [
        ["completion", "graphrag", "query", False],
        ["completion", "graphrag", "query", True],
    ]
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (
        rows["prompt_tokens"][0],
        rows["completion_tokens"][0],
    )


@pytest.mark.parametrize("fold", [True, False])
def test_system_turns_get_the_runs_treatment_and_text_parts_are_joined(scripted, tmp_path, fold):
    with proxied(scripted, tmp_path, fold_system=fold) as proxy:
        client(proxy).chat.completions.create(
            model="x",
            messages=[
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            ],
        )
    sent = scripted.chat_requests()[0]["body"]["messages"]
    if fold:
        assert sent == [{"role": "user", "content": "Be brief.\n\na\nb"}]
    else:
        assert sent == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "a\nb"}]


JSON_SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}


@pytest.mark.parametrize(
    "json_mode,response_format,sent_format",
    [
        ("json_object_schema", JSON_SCHEMA_FORMAT, {"type": "json_object", "schema": SCHEMA}),
        (
            "json_schema",
            JSON_SCHEMA_FORMAT,
            {"type": "json_schema", "json_schema": {"name": "Answer", "schema": SCHEMA}},
        ),
        ("json_object_schema", {"type": "json_object"}, {"type": "json_object"}),
        ("prompt_only", JSON_SCHEMA_FORMAT, None),
    ],
)
def test_json_replies_are_asked_for_as_the_json_mode_says(
    scripted, tmp_path, json_mode, response_format, sent_format
):
    scripted.script.append(("text", '{"answer": "Alvor"}'))
    # text_api completions: free text would go to /completions, a JSON reply still goes to chat
    with proxied(scripted, tmp_path, json_mode=json_mode, text_api="completions") as proxy:
        reply = ask(proxy, "Who?", response_format=response_format)
    assert json.loads(reply.choices[0].message.content) == {"answer": "Alvor"}
    (sent,) = [r["body"] for r in scripted.chat_requests()]
    assert sent.get("response_format") == sent_format
    if json_mode == "prompt_only":
        assert sent["messages"][-1]["content"].endswith(json.dumps(SCHEMA))


def test_streaming_sends_the_reply_its_finish_reason_and_usage(scripted, tmp_path):
    with proxied(scripted, tmp_path) as proxy:
        stream = ask(proxy, "stream me", stream=True, stream_options={"include_usage": True})
        chunks = list(stream)
        row = proxy.llm.ledger.frame().iloc[0]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "echo: stream me"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].model == "scripted"
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (
        row["prompt_tokens"],
        row["completion_tokens"],
    )


@pytest.mark.parametrize("encoding", ["base64", "float", None])
def test_embeddings_come_from_the_kit_embedder(scripted, tmp_path, encoding):
    texts = ["a knowledge graph", "a recipe"]
    with proxied(scripted, tmp_path) as proxy:
        extra = {} if encoding is None else {"encoding_format": encoding}  # None: the client's default
        reply = client(proxy, "lightrag", "index").embeddings.create(
            model="text-embedding-3", input=texts, **extra
        )
        expected = proxy.embedder.embed(texts, stage="check")  # from the cache the proxy's call filled
        rows = proxy.llm.ledger.frame()
    # asked for explicitly, base64 comes back as it is sent; by default the client decodes it
    decode = (lambda e: np.frombuffer(base64.b64decode(e), "<f4")) if encoding == "base64" else np.asarray
    got = np.array([decode(d.embedding) for d in reply.data], dtype=np.float32)
    assert np.allclose(got, expected, atol=1e-6) and reply.model == "emb"
    sent = [r for r in scripted.requests if r["path"].endswith("/embeddings")]
    assert len(sent) == 1
    assert rows[["kind", "method", "stage", "cached"]].values.tolist()[0] == [
        "embedding",
        "lightrag",
        "index",
        False,
    ]
    assert reply.usage.prompt_tokens == rows["prompt_tokens"][0] == 6


def test_embeddings_of_an_embedder_without_a_ledger_count_their_tokens(scripted, tmp_path):
    hashing = HashingEmbedder()
    with proxied(scripted, tmp_path, embedder=hashing) as proxy:
        reply = client(proxy).embeddings.create(model="x", input="one text")
    assert np.allclose(reply.data[0].embedding, hashing.embed(["one text"])[0], atol=1e-6)
    assert reply.usage.prompt_tokens == count_tokens("one text") and reply.model == hashing.model_name


def test_models_lists_the_runs_model_and_embedding_model(scripted, tmp_path):
    with proxied(scripted, tmp_path) as proxy:
        assert [m.id for m in client(proxy).models.list()] == ["scripted", "emb"]


def test_a_tally_around_bound_holds_exactly_the_bound_methods_calls(scripted, tmp_path):
    scripted.default_reply = InFlight(scripted.default_reply, hold_s=0.2, kind_of=lambda body: "chat")
    tallies = {}

    with proxied(scripted, tmp_path) as proxy:

        def answer(method: str) -> None:
            # the caller's side: a tally around the bound method, the upstream's calls concurrent
            with proxy.llm.ledger.tally() as tally, proxy.bound(method):
                with ThreadPoolExecutor(3) as pool:
                    list(pool.map(lambda i: ask(proxy, f"{method} question {i}", method), range(3)))
            tallies[method] = tally

        callers = [threading.Thread(target=answer, args=(m,)) for m in ("lightrag", "graphrag")]
        unbound = threading.Thread(target=lambda: [ask(proxy, f"other {i}", "kit") for i in range(2)])
        for thread in [*callers, unbound]:
            thread.start()
        for thread in [*callers, unbound]:
            thread.join()
        after = proxy.llm.ledger.tally()
        with after as late:
            ask(proxy, "after the block", "lightrag")  # no longer bound: outside the caller's tally
        rows = proxy.llm.ledger.frame()

    assert scripted.default_reply.most["chat"] >= 2, "the proxied calls did not overlap"
    assert len(rows) == 9
    for method in ("lightrag", "graphrag"):
        assert len(tallies[method].rows) == 3
        assert {r.method for r in tallies[method].rows} == {method}
        assert tallies[method].totals()["calls"] == 3
    assert late.rows == []


def test_a_method_bound_twice_at_once_is_refused(scripted, tmp_path):
    with proxied(scripted, tmp_path) as proxy, proxy.bound("lightrag"):
        with pytest.raises(RuntimeError, match="already bound"), proxy.bound("lightrag"):
            pass


def post(url: str, payload: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, payload, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


CHAT = {"model": "x", "messages": [{"role": "user", "content": "hi"}]}


# (endpoint, body, the error's param, what its message says)
REFUSED = [
    ("chat/completions", b"{not json", None, "not JSON"),
    ("chat/completions", b"[1, 2]", None, "not a JSON object"),
    ("chat/completions", {"model": "x"}, "messages", "non-empty list"),
    (
        "chat/completions",
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}]}]},
        "messages[0].content[1]",
        "'image_url' part",
    ),
    ("chat/completions", {"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role", "tool"),
    (
        "chat/completions",
        {"messages": [{"role": "assistant", "content": None}]},
        "messages[0].content",
        "a string or a list of text parts",
    ),
    ("chat/completions", {**CHAT, "n": 2}, "n", "one reply per request"),
    ("chat/completions", {**CHAT, "tools": [{"type": "function"}]}, "tools", "tool calling"),
    ("chat/completions", {**CHAT, "tool_choice": "required"}, "tool_choice", "tool calling"),
    ("chat/completions", {**CHAT, "logprobs": True}, "logprobs", "replay"),
    ("chat/completions", {**CHAT, "max_tokens": 0}, "max_tokens", "positive integer"),
    ("chat/completions", {**CHAT, "stop": [3]}, "stop", "strings"),
    ("chat/completions", {**CHAT, "stream": "yes"}, "stream", "true or false"),
    (
        "chat/completions",
        {**CHAT, "response_format": {"type": "json_schema", "json_schema": {"name": "a"}}},
        "response_format",
        "json_schema.schema",
    ),
    ("chat/completions", {**CHAT, "response_format": {"type": "grammar"}}, "response_format", "grammar"),
    ("embeddings", {"input": [[1, 2, 3]]}, "input", "token ids"),
    ("embeddings", {"input": [17, 18]}, "input", "token ids"),
    ("embeddings", {"input": []}, "input", "non-empty"),
    ("embeddings", {"input": ["a", None]}, "input[1]", "not a string"),
    ("embeddings", {"input": "a", "encoding_format": "int8"}, "encoding_format", "float or base64"),
]


def test_requests_the_kit_cannot_hold_to_the_run_are_400s_that_say_why(scripted, tmp_path):
    with proxied(scripted, tmp_path) as proxy:
        for endpoint, body, param, said in REFUSED:
            payload = body if isinstance(body, bytes) else json.dumps(body).encode()
            status, reply = post(f"{proxy.base_url('m', 's')}/{endpoint}", payload)
            case = f"{endpoint} {payload[:80]!r}: {status} {reply}"
            assert status == 400 and reply["error"]["param"] == param, case
            assert said in reply["error"]["message"], case
        rows = proxy.llm.ledger.frame()
    assert scripted.requests == [] and rows.empty  # nothing was sent or paid for


def test_an_unknown_path_is_a_404_that_says_what_a_path_looks_like(scripted, tmp_path):
    with proxied(scripted, tmp_path) as proxy:
        with pytest.raises(openai.NotFoundError, match=r"/<method>/<stage>/v1/chat/completions"):
            openai.OpenAI(base_url=f"http://127.0.0.1:{proxy.port}/v1", api_key="k").models.list()
        with pytest.raises(ValueError, match="stage 'a/b'"):
            proxy.base_url("lightrag", "a/b")


def test_the_proxy_listens_on_loopback_only(scripted, tmp_path):
    llm = make_llm(scripted.base_url, tmp_path)
    for host in ("0.0.0.0", "192.168.1.2", "localhost"):
        with pytest.raises(ValueError, match="loopback"):
            ModelProxy(llm, HashingEmbedder(), host=host)


@pytest.mark.fault
def test_a_failed_model_call_is_a_400_the_client_does_not_retry_and_is_ledgered_once(scripted, tmp_path):
    scripted.script.extend([("status", 500)] * 2)  # the kit's first attempt and its one retry
    with proxied(scripted, tmp_path, max_retries=1) as proxy:
        with pytest.raises(openai.BadRequestError) as refused:
            ask(proxy, "fails")  # the openai client would retry a 5xx twice
        rows = proxy.llm.ledger.frame()
    assert refused.value.type == "ragtrial_llm_error" and "server_error" in refused.value.message
    assert len(scripted.requests) == 2
    assert rows[["method", "failure", "attempts"]].values.tolist() == [["graphrag", "server_error", 2]]


@pytest.mark.fault
def test_an_endpoint_that_echoes_the_key_does_not_reach_the_upstream(scripted, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proxy-secret-4242")
    scripted.script.append(("echo_key", 401))
    with proxied(scripted, tmp_path) as proxy:
        with pytest.raises(openai.BadRequestError) as refused:
            ask(proxy, "who am i")
    assert "sk-proxy-secret-4242" not in json.dumps(refused.value.body)
    assert "sk-proxy-secret-4242" in scripted.requests[0]["authorization"]  # the kit did send it
