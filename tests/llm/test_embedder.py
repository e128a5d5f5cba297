"""Embeddings from an OpenAI-compatible endpoint: replies checked, failures typed and recorded."""

import math

import numpy as np
import pytest

from ragtrial.config.llm import EmbeddingSettings, LLMSettings
from ragtrial.llm.cache import ResponseCache, cache_key
from ragtrial.llm.embedder import Embedder
from ragtrial.llm.errors import LLMError
from ragtrial.llm.fanout import fan_out
from ragtrial.llm.ledger import Ledger, summarize

TEXTS = ["a knowledge graph", "a recipe"]


def make_embedder(base_url, tmp_path, cache=None, **retry) -> Embedder:
    settings = EmbeddingSettings(backend="openai_compatible", base_url=base_url, model="emb", batch_size=8)
    policy = LLMSettings(**{"backoff_initial_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 2.0, **retry})
    cache = ResponseCache(tmp_path / "c.sqlite" if cache is None else cache)
    return Embedder(settings, cache, Ledger("r", tmp_path / "ledger.csv"), policy)


def test_vectors_are_normalized_cached_and_ledgered(scripted, tmp_path, cache_location):
    embedder = make_embedder(scripted.base_url, tmp_path, cache_location)
    vectors = embedder.embed(TEXTS, stage="t")
    assert vectors.shape == (2, 3) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    again = make_embedder(scripted.base_url, tmp_path, cache_location).embed(TEXTS, stage="t")
    assert np.array_equal(again, vectors)
    assert len(scripted.requests) == 1 and scripted.requests[0]["body"]["encoding_format"] == "float"
    assert embedder.ledger.frame()["served_model"].tolist() == ["emb"]


BAD_VECTORS = {
    "too few": [[1.0, 0.0, 0.0]],
    "too many": [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]],
    "ragged": [[1.0, 0.0, 0.0], [1.0, 0.0]],
    "zero": [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]],
    "NaN": [[math.nan, 1.0, 0.0], [1.0, 1.0, 1.0]],
    "infinite": [[math.inf, 1.0, 0.0], [1.0, 1.0, 1.0]],
    "empty": [[], []],
    "not numbers": [["a", "b"], [1.0, 2.0]],
}


@pytest.mark.fault
@pytest.mark.parametrize("case", BAD_VECTORS)
def test_bad_vectors_are_a_typed_recorded_uncached_failure(scripted, tmp_path, case):
    scripted.script.extend([("vectors", BAD_VECTORS[case])] * 2)
    embedder = make_embedder(scripted.base_url, tmp_path, max_retries=1)
    with pytest.raises(LLMError) as err:
        embedder.embed(TEXTS, stage="t")
    assert err.value.kind == "malformed_response" and scripted.base_url in str(err.value)
    row = embedder.ledger.frame().iloc[0]
    assert (row["kind"], row["failure"], row["attempts"]) == ("embedding", "malformed_response", 2)
    assert summarize(embedder.ledger.frame())["failures"] == 1
    assert embedder.cache.counts()["embeddings"] == 0


@pytest.mark.fault
def test_a_body_without_embeddings_is_a_typed_failure(scripted, tmp_path):
    scripted.script.append(("body", 200, {"object": "list", "model": "emb"}))
    with pytest.raises(LLMError, match="malformed_response"):
        make_embedder(scripted.base_url, tmp_path, max_retries=0).embed(TEXTS, stage="t")


@pytest.mark.fault
def test_bad_vectors_then_good_ones_are_retried(scripted, tmp_path):
    scripted.script.append(("vectors", BAD_VECTORS["NaN"]))
    embedder = make_embedder(scripted.base_url, tmp_path)
    assert embedder.embed(TEXTS, stage="t").shape == (2, 3)
    assert embedder.ledger.frame()["attempts"].tolist() == [2]


@pytest.mark.fault
def test_a_zero_vector_in_an_older_cache_is_computed_again(scripted, tmp_path):
    ResponseCache(tmp_path / "c.sqlite").put_embeddings(
        "emb", [(cache_key({"embedding_model": "emb", "text": t}), np.zeros(3), 3) for t in TEXTS]
    )
    vectors = make_embedder(scripted.base_url, tmp_path).embed(TEXTS, stage="t")
    assert len(scripted.requests) == 1 and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)


@pytest.mark.fault
def test_an_embeddings_request_honours_the_timeout(scripted, tmp_path):
    scripted.script.append(("sleep", 4.0))
    embedder = make_embedder(scripted.base_url, tmp_path, max_retries=0, timeout_s=0.5)
    with pytest.raises(LLMError) as err:
        embedder.embed(TEXTS, stage="t")
    assert err.value.kind == "timeout" and embedder.ledger.frame()["failure"].tolist() == ["timeout"]


@pytest.mark.fault
def test_a_key_echoed_by_the_embeddings_endpoint_is_redacted(scripted, tmp_path, monkeypatch):
    key = "sk-embed-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    scripted.script.append(("body", 401, {"error": {"message": f"bad key {key}"}}))
    with pytest.raises(LLMError) as err:
        make_embedder(scripted.base_url, tmp_path, max_retries=0).embed(TEXTS, stage="t")
    assert key not in str(err.value) and "bad key ***" in str(err.value)


def test_the_local_model_embeds_from_many_threads_as_from_one(tmp_path):
    """Stages fan out across threads; the local model and its fast tokenizer are not thread-safe."""
    # 48 calls from 8 threads: enough for two threads to meet in the tokenizer without the lock
    texts = [[f"text number {i} " * (1 + i % 12), f"another {i} " * (1 + i % 7)] for i in range(48)]

    def embedder(name: str) -> Embedder:
        return Embedder(
            EmbeddingSettings(), ResponseCache(tmp_path / f"{name}.sqlite"), Ledger("r"), LLMSettings()
        )

    one, many = embedder("one"), embedder("many")
    alone = [one.embed(pair, stage="t") for pair in texts]
    together = fan_out(lambda pair: many.embed(pair, stage="t"), texts, concurrency=8)
    assert all(np.allclose(a, b, atol=1e-5) for a, b in zip(alone, together, strict=True))


def test_bfloat16_vectors_are_cached_apart_from_float32_and_agree_with_them(tmp_path):
    """The precision is part of the cache key: a float32 run never reads bfloat16 vectors, or the reverse."""
    cache = ResponseCache(tmp_path / "c.sqlite")
    texts = [f"the {i}th passage on the river and its bridge " * (1 + i % 5) for i in range(20)]

    def embedder(precision: str, ledger: Ledger) -> Embedder:
        return Embedder(EmbeddingSettings(precision=precision), cache, ledger, LLMSettings())

    full, half = Ledger("full"), Ledger("half")
    exact = embedder("float32", full).embed(texts, stage="t")
    fast = embedder("bfloat16", half).embed(texts, stage="t")
    # both computed live: the second did not replay the first's rows
    assert list(full.frame()["cached"]) == list(half.frame()["cached"]) == [False]
    assert not np.array_equal(exact, fast)
    assert np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    assert (exact * fast).sum(axis=1).min() > 0.999
    again = Ledger("again")
    assert np.array_equal(embedder("bfloat16", again).embed(texts, stage="t"), fast)
    assert list(again.frame()["cached"]) == [True]


def test_the_precision_names_the_local_models_vectors_only():
    """An endpoint computes its own vectors: a batch that sets bfloat16 (params/real_evidence.yaml) run
    against an endpoint keys its vectors by the endpoint's model alone.
    """
    local = EmbeddingSettings(precision="bfloat16")
    endpoint = EmbeddingSettings(
        backend="openai_compatible", base_url="http://127.0.0.1:1/v1", precision="bfloat16"
    )
    assert (
        local.vectors == "all-MiniLM-L6-v2 (bfloat16)" and EmbeddingSettings().vectors == "all-MiniLM-L6-v2"
    )
    assert endpoint.vectors == "all-MiniLM-L6-v2"
